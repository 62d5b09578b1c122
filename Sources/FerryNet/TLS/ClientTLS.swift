import Foundation
import NIOCore
import NIOSSL

/// How a replicator decides to trust a listener's certificate (SPEC §4–5).
public enum ServerTrust: Sendable {
    /// The system's roots, with the host name (or IP address) checked.
    case system
    /// These roots (`--ca-file`), with the host name (or IP address) checked.
    case roots(TrustedRoots)
    /// Any self-signed certificate (`--accept-self-signed`): encrypted, not authenticated.
    case anySelfSigned
    /// Only this exact leaf certificate (`--pin`), by its DER bytes.
    case pinned([UInt8])
    /// Only a leaf certificate whose SHA-256 is this (lowercase hex): the fingerprint a peer
    /// advertised over DNS-SD, pinned on first use.
    case fingerprint(String)

    /// Reads `--pin CERT` (DER or PEM).
    public static func pin(file path: String) throws -> ServerTrust {
        let bytes: [UInt8]
        do { bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path))) } catch {
            throw TLSError("cannot read the pinned certificate \(path): \(error.localizedDescription)")
        }
        if let pem = try? NIOSSLCertificate.fromPEMBytes(bytes), let first = pem.first {
            return .pinned(try first.toDERBytes())
        }
        guard let der = try? NIOSSLCertificate(bytes: bytes, format: .der) else {
            throw TLSError("\(path) is neither a PEM nor a DER certificate")
        }
        return .pinned(try der.toDERBytes())
    }

    /// A SHA-256 fingerprint as people copy it (64 hex digits, either case, colons or spaces
    /// between pairs allowed), in the form `CertificateSummary.fingerprint` prints; nil when
    /// `text` is not one.
    public static func fingerprint(parsing text: String) -> String? {
        let hex = text.lowercased().filter { $0 != ":" && $0 != " " }
        guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit }) else { return nil }
        return hex
    }

    /// The SHA-256 fingerprint this trust pins, if it pins one.
    public var pinnedFingerprint: String? {
        switch self {
        case .pinned(let der): CertificateSummary(der: der).fingerprint
        case .fingerprint(let fp): fp.lowercased()
        case .system, .roots, .anySelfSigned: nil
        }
    }

    /// Reads `--ca-file PEM`.
    public static func caFile(_ path: String) throws -> ServerTrust {
        .roots(try TrustedRoots(pemFile: path))
    }

    /// The option that would trust `presented`, for the refusal message.
    func advice(for presented: CertificateSummary) -> String {
        if presented.isSelfSigned {
            return "to trust it, pass --pin with that certificate (e.g. from `ferry identity show` on the listener's machine) or --accept-self-signed"
        }
        return "to trust it, pass --ca-file with the root that issued it, or --pin with the certificate"
    }

    /// A sentence naming the mode, for messages.
    var modeDescription: String {
        switch self {
        case .system: "the system's trust roots"
        case .roots: "the roots of --ca-file"
        case .anySelfSigned: "--accept-self-signed (which accepts self-signed certificates only)"
        case .pinned(let der): "--pin \(CertificateSummary(der: der).fingerprint)"
        case .fingerprint(let fp): "the pinned fingerprint \(fp)"
        }
    }
}

/// The replicator's TLS settings for `wss://`.
public struct ClientTLS: Sendable {
    /// How the server's certificate is trusted.
    public var trust: ServerTrust
    /// A client certificate to present (`--client-identity P12`).
    public var identity: TLSIdentity?

    /// Settings with `trust` and no client certificate.
    public init(trust: ServerTrust, identity: TLSIdentity? = nil) {
        self.trust = trust
        self.identity = identity
    }

    /// The NIOSSL configuration; `pinned`/`anySelfSigned` verify in `verify(_:)` instead.
    func configuration() -> TLSConfiguration {
        var config = TLSConfiguration.makeClientConfiguration()
        config.minimumTLSVersion = .tlsv12
        switch trust {
        case .system: config.trustRoots = .default
        case .roots(let roots): config.trustRoots = .certificates(roots.certificates)
        case .anySelfSigned, .pinned, .fingerprint:
            // The custom callback decides; hostname checks make no sense for a pinned or
            // self-signed certificate met by its address. No roots: loading the system's CA
            // bundle, which nothing here consults, took 30 ms of every connection's start.
            config.certificateVerification = .noHostnameVerification
            config.trustRoots = .certificates([])
        }
        if let identity {
            config.certificateChain = identity.certificateChain.map { .certificate($0) }
            config.privateKey = .privateKey(identity.privateKey)
        }
        return config
    }

    /// The custom verification of the pinned and self-signed modes (nil: NIOSSL's own).
    func customVerification(recording presented: PresentedCertificate) -> NIOSSLCustomVerificationCallback? {
        let trust = self.trust
        switch trust {
        case .system, .roots: return nil
        case .pinned(let pinned):
            return { chain, promise in
                let leaf = (try? chain.first?.toDERBytes()) ?? nil
                presented.set(leaf)
                promise.succeed(leaf == pinned ? NIOSSLVerificationResult.certificateVerified : NIOSSLVerificationResult.failed)
            }
        case .fingerprint(let expected):
            return { chain, promise in
                let leaf = (try? chain.first?.toDERBytes()) ?? nil
                presented.set(leaf)
                let ok = leaf.map { CertificateSummary(der: $0).fingerprint == expected.lowercased() } ?? false
                promise.succeed(ok ? NIOSSLVerificationResult.certificateVerified : NIOSSLVerificationResult.failed)
            }
        case .anySelfSigned:
            return { chain, promise in
                let leaf = (try? chain.first?.toDERBytes()) ?? nil
                presented.set(leaf)
                let ok = leaf.map { CertificateSummary(der: $0).isSelfSigned } ?? false
                promise.succeed(ok ? NIOSSLVerificationResult.certificateVerified : NIOSSLVerificationResult.failed)
            }
        }
    }
}

/// The leaf certificate a server presented, recorded by the verification callback so that a
/// refusal can say what it was.
final class PresentedCertificate: @unchecked Sendable {
    private let lock = NSLock()
    private var der: [UInt8]?
    func set(_ value: [UInt8]?) { lock.withLock { der = value } }
    var value: [UInt8]? { lock.withLock { der } }
}

/// Certificates trusted as roots, read from a PEM file (`--ca-file`, `--client-ca`).
public struct TrustedRoots: @unchecked Sendable {
    let certificates: [NIOSSLCertificate]

    /// Reads every certificate of a PEM file; fails clearly when there is none.
    public init(pemFile path: String) throws {
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw TLSError("cannot read certificates from \(path) (a PEM file is expected): \(error)")
        }
        guard !certificates.isEmpty else { throw TLSError("\(path) holds no certificate") }
    }
}
