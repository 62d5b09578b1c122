import ArgumentParser
import FerryAgent
import FerryCore
import FerryNet
import FerryStore
import Foundation

/// `ferry identity`: the listener's TLS identity (SPEC §5).
struct IdentityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identity",
        abstract: "Create, import, show or delete the listener's TLS identity (used by `serve --tls identity`).",
        subcommands: [Create.self, Import.self, Show.self, Delete.self])

    /// `ferry identity create --cn NAME [--days N]`.
    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Generate a self-signed identity (EC P-256) for this folder's listener.")

        @Option(help: "The certificate's common name.")
        var cn: String

        @Option(help: "Days of validity.")
        var days = 365

        @OptionGroup var folder: FolderOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard days >= 1 else { throw ValidationError("--days must be at least 1") }
            guard !cn.isEmpty else { throw ValidationError("--cn must not be empty") }
        }

        func run() throws {
            let writer = try folder.lockForIdentityChange()
            defer { withExtendedLifetime(writer) {} }
            let store = IdentityStore(layout: writer.layout)
            let identity = try tlsStep { try TLSIdentity.selfSigned(commonName: cn, days: days) }
            try store.save(identity, as: .identity)
            printSummary(identity.summary, slot: .identity, store: store, json: output.json)
        }
    }

    /// `ferry identity import FILE.p12 [--password-file F]`.
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Import a PKCS#12 file (certificate and key), e.g. samples/listener-cert-pkey.p12.",
            discussion: "The password comes from --password-file, else $FERRY_P12_PASSWORD; without either, the file is read without one.")

        @Argument(help: ArgumentHelp("The PKCS#12 file.", valueName: "file.p12"))
        var file: String

        @Option(help: ArgumentHelp("A file whose first line is the PKCS#12 password.", valueName: "file"))
        var passwordFile: String?

        @OptionGroup var folder: FolderOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            let writer = try folder.lockForIdentityChange()
            defer { withExtendedLifetime(writer) {} }
            let store = IdentityStore(layout: writer.layout)
            var password = ProcessInfo.processInfo.environment["FERRY_P12_PASSWORD"]
            if let passwordFile { password = try readPassword(file: passwordFile) }
            let identity = try tlsStep { try TLSIdentity.pkcs12(path: absolute(file), password: password, passwordHint: "--password-file F or $FERRY_P12_PASSWORD") }
            try store.save(identity, as: .identity)
            printSummary(identity.summary, slot: .identity, store: store, json: output.json)
        }
    }

    /// `ferry identity show`.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the identity's subject, expiry and SHA-256 fingerprint.",
            discussion: "Shows the identity made by create/import; without one, the anonymous identity `serve` generated.")

        @OptionGroup var folder: FolderOptions
        @OptionGroup var output: OutputOptions

        func run() throws {
            let store = IdentityStore(layout: FolderLayout(root: try folder.resolveRoot()))
            for slot in [IdentityStore.Slot.identity, .anonymous] {
                if let identity = try tlsStep({ try store.load(slot) }) {
                    printSummary(identity.summary, slot: slot, store: store, json: output.json)
                    return
                }
            }
            throw CLIError("this folder has no TLS identity yet: `ferry identity create --cn NAME`, `ferry identity import FILE.p12`, or start `ferry serve` (--tls anonymous makes one)")
        }
    }

    /// `ferry identity delete`.
    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete the identity made by create/import (add --anonymous to delete the generated one: peers that pinned it will refuse the next).")

        @Flag(help: "Delete the anonymous identity instead.")
        var anonymous = false

        @OptionGroup var folder: FolderOptions

        func run() throws {
            let writer = try folder.lockForIdentityChange()
            defer { withExtendedLifetime(writer) {} }
            let store = IdentityStore(layout: writer.layout)
            let slot: IdentityStore.Slot = anonymous ? .anonymous : .identity
            guard try store.delete(slot) else { throw CLIError("there is no \(slot.rawValue) identity to delete") }
            print("deleted the \(slot.rawValue) identity")
        }
    }
}

/// Runs a TLS step, turning its error into a one-line failure.
func tlsStep<T>(_ body: () throws -> T) throws -> T {
    do { return try body() } catch let error as TLSError { throw CLIError(error.description) }
}

func printSummary(_ s: CertificateSummary, slot: IdentityStore.Slot, store: IdentityStore, json: Bool) {
    let expiry = s.notValidAfter.map { ISO8601DateFormatter().string(from: $0) } ?? "unknown"
    if json {
        printJSON(["kind": .string(slot.rawValue), "subject": .string(s.subject), "issuer": .string(s.issuer),
                   "not_valid_after": .string(expiry), "sha256": .string(s.fingerprint), "self_signed": .bool(s.isSelfSigned),
                   "certificate": .string(store.certificatePath(slot))])
        return
    }
    print("identity:    \(slot.rawValue)\(slot == .anonymous ? " (generated by serve --tls anonymous)" : "")")
    print("subject:     \(s.subject)")
    print("issuer:      \(s.issuer)\(s.isSelfSigned ? " (self-signed)" : "")")
    print("expires:     \(expiry)")
    print("sha256:      \(s.fingerprint)")
    print("certificate: \(store.certificatePath(slot))")
}
