import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A TLS identity: a certificate (with any chain) and its private key, as a listener presents
/// it or a replicator offers it as a client certificate.
public struct TLSIdentity: @unchecked Sendable {
    /// The leaf first, then any intermediates.
    public let certificateChain: [NIOSSLCertificate]
    /// The leaf's private key.
    public let privateKey: NIOSSLPrivateKey
    /// The leaf certificate's DER bytes.
    public let leafDER: [UInt8]

    /// An identity from its parts; fails if the chain is empty.
    public init(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey) throws {
        guard let leaf = certificateChain.first else { throw TLSError("the identity has no certificate") }
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.leafDER = try leaf.toDERBytes()
    }

    /// What `ferry identity show` and refusal messages say about the leaf.
    public var summary: CertificateSummary { CertificateSummary(der: leafDER) }

    /// Generates a self-signed certificate (EC P-256, CA:TRUE so that it can be its own trust
    /// root, SAN localhost, 127.0.0.1 and this host's name) valid for `days`.
    public static func selfSigned(commonName: String, days: Int) throws -> TLSIdentity {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        var names: [GeneralName] = [.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))]
        let host = ProcessInfo.processInfo.hostName
        if !host.isEmpty && host != "localhost" { names.append(.dnsName(host)) }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(Double(days) * 86_400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let cert = try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)
        let privateKey = try NIOSSLPrivateKey(bytes: Array(key.derRepresentation), format: .der)
        return try TLSIdentity(certificateChain: [cert], privateKey: privateKey)
    }

    /// Reads a PKCS#12 file (certificate chain and key), e.g. `samples/listener-cert-pkey.p12`;
    /// `passwordHint` says how the user gives its password, for the message of a wrong one.
    public static func pkcs12(path: String, password: String?, passwordHint: String) throws -> TLSIdentity {
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: password.map { Array($0.utf8) })
        } catch {
            // BoringSSL's words (and its build paths) would say nothing more to a user.
            let exists = FileManager.default.isReadableFile(atPath: path)
            throw TLSError(exists ? "cannot open \(path): the password is wrong, or it is not a PKCS#12 (.p12) file; give its password with \(passwordHint)"
                                  : "cannot read \(path): no such file, or not readable")
        }
        return try TLSIdentity(certificateChain: bundle.certificateChain, privateKey: bundle.privateKey)
    }

    /// Reads the PEM certificate chain and DER key written by `write(certificate:key:)`.
    public static func load(certificate: String, key: String) throws -> TLSIdentity {
        do {
            return try TLSIdentity(certificateChain: NIOSSLCertificate.fromPEMFile(certificate),
                                   privateKey: NIOSSLPrivateKey(file: key, format: .der))
        } catch let error as TLSError {
            throw error
        } catch {
            throw TLSError("cannot read the identity in \(certificate) and \(key): \(error)")
        }
    }

    /// The certificate chain as PEM text (for `identity.pem`).
    public func chainPEM() throws -> [UInt8] {
        var pem = ""
        for cert in certificateChain {
            pem += try PEMDocument(type: "CERTIFICATE", derBytes: cert.toDERBytes()).pemString + "\n"
        }
        return Array(pem.utf8)
    }

    /// The private key as DER (for `identity.key`, mode 0600).
    public func keyDER() throws -> [UInt8] { try privateKey.derBytes }
}

/// Subject, expiry and SHA-256 fingerprint of a certificate.
public struct CertificateSummary: Sendable, Equatable {
    /// The subject as RFC 4514 text ("CN=inventory").
    public var subject: String
    /// The issuer.
    public var issuer: String
    /// Start of validity.
    public var notValidBefore: Date?
    /// End of validity.
    public var notValidAfter: Date?
    /// The DNS names and IP addresses it is for (its subject alternative names).
    public var names: [String] = []
    /// SHA-256 of the DER bytes, lowercase hex (what `openssl x509 -fingerprint -sha256` prints, without colons).
    public var fingerprint: String
    /// True when issuer equals subject and the certificate's own key verifies its signature.
    public var isSelfSigned: Bool

    /// Reads a certificate's DER bytes (a certificate X509 cannot parse still gets a fingerprint).
    public init(der: [UInt8]) {
        fingerprint = SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
        if let cert = try? Certificate(derEncoded: der) {
            subject = cert.subject.description
            issuer = cert.issuer.description
            notValidBefore = cert.notValidBefore
            notValidAfter = cert.notValidAfter
            names = ((try? cert.extensions.subjectAlternativeNames) ?? nil).map { $0.compactMap(Self.text) } ?? []
            isSelfSigned = cert.issuer == cert.subject && cert.publicKey.isValidSignature(cert.signature, for: cert)
        } else {
            subject = "(unparseable certificate)"
            issuer = subject
            notValidBefore = nil
            notValidAfter = nil
            isSelfSigned = false
        }
    }

    /// A DNS name or an IP address as text; nil for other kinds of name.
    private static func text(_ name: GeneralName) -> String? {
        switch name {
        case .dnsName(let dns): return dns
        case .ipAddress(let bytes):
            let octets = Array(bytes.bytes)
            if octets.count == 4 { return octets.map(String.init).joined(separator: ".") }
            if octets.count == 16 { return stride(from: 0, to: 16, by: 2).map { String(UInt16(octets[$0]) << 8 | UInt16(octets[$0 + 1]), radix: 16) }.joined(separator: ":") }
            return nil
        default: return nil
        }
    }

    /// The fingerprint as openssl prints it: uppercase hex pairs joined by colons.
    public var colonFingerprint: String {
        stride(from: 0, to: fingerprint.count, by: 2).map { i in
            let start = fingerprint.index(fingerprint.startIndex, offsetBy: i)
            return fingerprint[start..<fingerprint.index(start, offsetBy: 2)].uppercased()
        }.joined(separator: ":")
    }
}

/// A TLS setup problem, in one sentence.
public struct TLSError: Error, Sendable, CustomStringConvertible {
    /// The sentence.
    public let description: String
    /// An error.
    public init(_ description: String) { self.description = description }
}
