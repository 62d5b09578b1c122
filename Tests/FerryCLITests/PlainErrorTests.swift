import Foundation
import Testing
import FerryTesting

/// The mistakes a new user makes first, each answered in one sentence that says what to do,
/// with the right exit code and at once (no retries for what retrying cannot fix).
@Suite struct PlainErrorTests {
    func folder(_ tmp: TemporaryDirectory, _ name: String, sample: Bool = false) throws -> String {
        let path = tmp.appending(name)
        #expect(try FerryProcess.ferry(["init", path, "--name", "inventory"] + (sample ? ["--sample"] : [])).status == 0)
        return path
    }

    @Test func urlsAndTrustOptionsThatCannotWorkAreRefusedAsUsageErrors() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let b = try folder(tmp, "b")
            let withPassword = try FerryProcess.ferry(["sync", "ws://bob:hunter2@127.0.0.1:1/inventory"], in: b)
            #expect(withPassword.status == 2 && withPassword.stderr.contains("may not carry credentials")
                    && withPassword.stderr.contains("--password-file") && !withPassword.stderr.contains("hunter2"), "\(withPassword.stderr)")
            let pinOverPlain = try FerryProcess.ferry(["sync", "ws://127.0.0.1:1/inventory", "--accept-self-signed"], in: b)
            #expect(pinOverPlain.status == 2 && pinOverPlain.stderr.contains("are for wss:// peers"), "\(pinOverPlain.stderr)")
            let notAURL = try FerryProcess.ferry(["sync", "http://127.0.0.1:1/inventory"], in: b)
            #expect(notAURL.status == 2 && notAURL.stderr.contains("wss://HOST:PORT/DB"), "\(notAURL.stderr)")
            let wrongP12 = try FerryProcess.ferry(["sync", "wss://127.0.0.1:1/inventory", "--accept-self-signed", "--client-identity",
                                                   FerryProcess.samplesDirectory + "/listener-cert-pkey.p12"], in: b,
                                                  environment: ["FERRY_CLIENT_IDENTITY_PASSWORD": "not-the-password"])
            #expect(wrongP12.status == 1 && wrongP12.stderr.contains("the password is wrong")
                    && wrongP12.stderr.contains("--client-identity-password-file")
                    && !wrongP12.stderr.contains("BoringSSL") && !wrongP12.stderr.contains(".swift"), "\(wrongP12.stderr)")
            // A mistyped -C is not a folder to `ferry init`; a document never recorded has no log.
            let typo = try FerryProcess.ferry(["-C", tmp.appending("no-such-folder"), "status"])
            #expect(typo.status == 4 && typo.stderr.contains("no-such-folder: no such directory") && !typo.stderr.contains("ferry init"), "\(typo.stderr)")
            try tmp.write("a-file", "not a folder")
            let aFile = try FerryProcess.ferry(["-C", tmp.appending("a-file"), "status"])
            #expect(aFile.status == 4 && aFile.stderr.contains("a-file: no such directory"), "\(aFile.stderr)")
            // A mistyped command after -C is named as such, not "Unknown option '-C'".
            let bogus = try FerryProcess.ferry(["-C", b, "statsu"])
            #expect(bogus.status == 2, "\(bogus.status)")
            #expect(bogus.stderr.contains("'statsu'") && !bogus.stderr.contains("'-C'"), "\(bogus.stderr)")
            let noLog = try FerryProcess.ferry(["log", "nosuch.json"], in: b)
            #expect(noLog.status == 1 && noLog.stderr.contains("no document nosuch.json"), "\(noLog.stderr)")
            // Help on a command that does not exist says so, instead of showing the list and exit 0.
            for topic in [["nosuch"], ["identity", "nosuch"]] {
                let help = try FerryProcess.ferry(["help"] + topic)
                #expect(help.status == 2 && help.stderr == "ferry: no command 'nosuch'; 'ferry help' lists them\n" && help.stdout.isEmpty,
                        "\(help.status) \(help.stderr)")
            }
            for topic in [["sync"], ["identity", "create"]] {
                let help = try FerryProcess.ferry(["help"] + topic)
                #expect(help.status == 0 && help.stdout.contains("USAGE: ferry \(topic.joined(separator: " "))"), "\(help.stdout)")
            }
            // An --interface that is no address or interface of this machine, named as such.
            for (spec, said) in [("10.9.9.9", "10.9.9.9 is not an address of this machine (it has 127.0.0.1"),
                                 ("nosuchif0", "no IPv4 address or interface named nosuchif0")] {
                let serve = try FerryProcess.ferry(["serve", "--interface", spec, "--port", "0", "--tls", "off", "--no-advertise"], in: b)
                #expect(serve.status == 2 && serve.stderr.hasPrefix("ferry: --interface: \(said)") && !serve.stderr.contains("errno"),
                        "\(serve.status) \(serve.stderr)")
            }
            // A --service-name DNS-SD cannot take (one label: 63 bytes) is refused before anything starts.
            let longName = try FerryProcess.ferry(["serve", "--service-name", String(repeating: "é", count: 32), "--port", "0", "--tls", "off"], in: b)
            #expect(longName.status == 2 && longName.stderr.contains("--service-name must be 1 to 63 bytes (DNS-SD's limit); this one is 64"),
                    "\(longName.status) \(longName.stderr)")
            // A --pin that is neither a fingerprint nor a file is a usage error naming both.
            let badPin = try FerryProcess.ferry(["sync", "wss://127.0.0.1:1/inventory", "--pin", "abc"], in: b)
            #expect(badPin.status == 2 && badPin.stderr == "ferry: --pin abc: neither a SHA-256 fingerprint (64 hex digits) nor a certificate file\n",
                    "\(badPin.stderr)")
        }
    }

    @Test func aSchemeThatDoesNotMatchTheListenerIsNamedAtOnce() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = try folder(tmp, "a", sample: true), b = try folder(tmp, "b")
            let plain = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
            let plainURL = try #require(plain.url)
            let start = Date()
            let tlsToPlain = try FerryProcess.ferry(["sync", plainURL.replacingOccurrences(of: "ws://", with: "wss://"), "--accept-self-signed"], in: b)
            #expect(tlsToPlain.status == 1 && tlsToPlain.stderr.contains("does not speak TLS") && tlsToPlain.stderr.contains("use ws://"),
                    "\(tlsToPlain.stderr)")
            #expect(Date().timeIntervalSince(start) < 5, "retried instead of stopping")
            #expect(plain.stop() == 0)

            let secure = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--no-advertise"])
            let secureURL = try #require(secure.url)
            let plainToTLS = try FerryProcess.ferry(["sync", secureURL.replacingOccurrences(of: "wss://", with: "ws://")], in: b)
            #expect(plainToTLS.status == 1 && plainToTLS.stderr.contains("speaks TLS: use wss://"), "\(plainToTLS.stderr)")
            #expect(secure.stop() == 0)

            // Nothing listens there any more: said so, in words.
            let refused = try FerryProcess.ferry(["sync", secureURL, "--accept-self-signed", "--max-attempts", "1"], in: b)
            #expect(refused.status == 1 && refused.stderr.contains("nothing is listening at") && refused.stderr.contains("connection refused"),
                    "\(refused.stderr)")
        }
    }

    /// Open by default is said out loud: a listener beyond loopback with nobody checked, and a
    /// password that would cross the network in clear.
    @Test func anOpenListenerAndAClearPasswordAreWarnedAbout() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = try folder(tmp, "a")
            // Bound to every interface for a moment; nothing connects to it.
            let open = try RunningAgent(folder: a, arguments: ["--interface", "0.0.0.0", "--port", "0", "--tls", "off", "--no-advertise"])
            #expect(open.log().contains("anyone who can reach this machine can read and change this folder"), "\(open.log())")
            #expect(open.stop() == 0)
            let local = try RunningAgent(folder: a, arguments: ["--interface", "127.0.0.1", "--port", "0", "--tls", "off", "--no-advertise"])
            #expect(!local.log().contains("anyone who can reach"), "\(local.log())")
            #expect(local.stop() == 0)
            let b = try folder(tmp, "b")
            // 0.0.0.0 is not a loopback name, yet a connect to it stays on this machine (Linux).
            let clear = try FerryProcess.ferry(["sync", "ws://0.0.0.0:9/inventory", "--user", "bob", "--connect-timeout", "0.2", "--max-attempts", "1"],
                                               in: b, environment: ["FERRY_PASSWORD": "pw"])
            #expect(clear.stderr.contains("password crosses the network in clear over ws://"), "\(clear.stderr)")
        }
    }
}
