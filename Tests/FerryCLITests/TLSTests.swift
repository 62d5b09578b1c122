import FerryTesting
import Foundation
import Testing

/// TLS end to end: real listeners and replicators (the built binary) on 127.0.0.1, checked
/// with the `openssl` CLI, with certificates the `openssl` CLI made.
@Suite(.serialized) struct TLSTests {
    let samples = FerryProcess.samplesDirectory

    func serve(_ folder: String, port: Int = 0, _extra: [String] = []) throws -> RunningAgent {
        try RunningAgent(folder: folder, arguments: ["--interface", "127.0.0.1", "--port", "\(port)"] + _extra)
    }

    func initFolder(_ path: String, sample: Bool = false) throws {
        let r = try FerryProcess.ferry(["init", path, "--name", "inventory"] + (sample ? ["--sample"] : []))
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// `ferry sync URL --pull` into a new empty folder; returns the result and the folder.
    func pull(_ url: String, into folder: String, _ options: [String], environment: [String: String] = [:]) throws -> FerryProcess.Result {
        if !FileManager.default.fileExists(atPath: folder) { try initFolder(folder) }
        return try FerryProcess.ferry(["sync", url, "--pull"] + options, in: folder, environment: environment)
    }

    func sameList(_ a: String, _ b: String) throws -> Bool {
        try FerryProcess.shell("diff <(jq -S . \(a)/samplelist.json) <(jq -S . \(b)/samplelist.json)").status == 0
    }

    /// Shell lines that stop at the first failure and make a test CA, `ca.pem` and `ca.key`.
    static let makeCA = """
        set -e
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -subj /CN=ferry-test-ca -days 2 \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null

        """

    func port(_ url: String) -> Int? { url.split(separator: ":").last?.split(separator: "/").first.flatMap { Int($0) } }

    /// Over `ferry-1` and over Couchbase Lite's BLIP (`--protocol cbl`): TLS is below both.
    @Test(arguments: SyncTests.wires) func theFourRecommendedCombinationsSyncTheSample(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let cases: [(name: String, serve: [String], setup: [[String]], client: [String])] = [
                ("off", ["--tls", "off"], [], []),
                ("anonymous", [], [], ["--accept-self-signed"]),
                ("imported", ["--tls", "identity"],
                 [["identity", "import", samples + "/listener-cert-pkey.p12", "--password-file", samples + "/listener-cert-pkey.password"]],
                 ["--pin", samples + "/listener-pinned-cert.cer"]),
                ("generated", ["--tls", "identity"], [["identity", "create", "--cn", "inventory-listener", "--days", "30"]], ["--accept-self-signed"]),
            ]
            for c in cases {
                let a = tmp.appending("\(c.name)-a"), b = tmp.appending("\(c.name)-b")
                try initFolder(a, sample: true)
                for step in c.setup {
                    let r = try FerryProcess.ferry(step, in: a)
                    #expect(r.status == 0, "\(c.name): \(r.stderr)")
                }
                let listener = try serve(a, _extra: c.serve)
                let url = try #require(listener.url)
                #expect(url.hasPrefix(c.name == "off" ? "ws://" : "wss://"), "\(url)")
                let r = try pull(url, into: b, ["--protocol", wire] + c.client)
                #expect(r.status == 0, "\(c.name): \(r.stderr)")
                #expect(try sameList(a, b), "\(c.name)")
                listener.stop()
            }
        }
    }

    @Test func trustIsRefusedWithExit3UnlessSelfSignedIsAcceptedOrTheRightCertificateIsPinned() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a")
            try initFolder(a, sample: true)
            let listener = try serve(a)
            let url = try #require(listener.url)
            let fingerprint = try FerryProcess.shell("openssl x509 -in .ferry/tls/anonymous.pem -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f", in: a)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(fingerprint.count == 64)

            let untrusted = try pull(url, into: tmp.appending("b1"), [])
            #expect(untrusted.status == 3, "\(untrusted.stderr)")
            // The refusal says what was presented and how to trust it.
            #expect(untrusted.stderr.contains(fingerprint) && untrusted.stderr.contains("--pin"), "\(untrusted.stderr)")
            #expect(!FileManager.default.fileExists(atPath: tmp.appending("b1/samplelist.json")))

            #expect(try pull(url, into: tmp.appending("b2"), ["--accept-self-signed"]).status == 0)
            let pinned = try pull(url, into: tmp.appending("b3"), ["--pin", a + "/.ferry/tls/anonymous.pem"])
            #expect(pinned.status == 0, "\(pinned.stderr)")
            let wrongPin = try pull(url, into: tmp.appending("b4"), ["--pin", samples + "/listener-pinned-cert.cer"])
            #expect(wrongPin.status == 3, "\(wrongPin.stderr)")
            #expect(wrongPin.stderr.contains(fingerprint), "\(wrongPin.stderr)")
            // --ca-file with the listener's own (CA:TRUE) certificate as the root also works.
            let rooted = try pull(url, into: tmp.appending("b5"), ["--ca-file", a + "/.ferry/tls/anonymous.pem"])
            #expect(rooted.status == 0, "\(rooted.stderr)")
            listener.stop()
        }
    }

    @Test func onlyTLS12AndUpAndTheAnonymousIdentitySurvivesARestart() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a")
            try initFolder(a)
            var listener = try serve(a)
            let url = try #require(listener.url)
            let port = try #require(self.port(url))
            func handshake(_ version: String) throws -> FerryProcess.Result {
                try FerryProcess.shell("openssl s_client -connect 127.0.0.1:\(port) \(version) </dev/null")
            }
            let old = try handshake("-tls1_1")
            #expect(old.status != 0, "TLS 1.1 was accepted")
            #expect(old.stderr.contains("alert protocol version") || old.stdout.contains("Cipher is (NONE)"), "\(old.stderr)")
            let v12 = try handshake("-tls1_2"), v13 = try handshake("-tls1_3")
            #expect(v12.status == 0 && v12.stdout.contains("TLSv1.2"), "\(v12.stderr)")
            #expect(v13.status == 0 && v13.stdout.contains("TLSv1.3"), "\(v13.stderr)")

            func servedFingerprint() throws -> String {
                try FerryProcess.shell("openssl s_client -connect 127.0.0.1:\(port) </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f")
                    .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let before = try servedFingerprint()
            listener.stop()
            listener = try serve(a, port: port)
            let after = try servedFingerprint()
            #expect(before.count == 64 && before == after, "\(before) vs \(after)")
            // A plain GET of the database describes the listener, with JSON booleans.
            let described = try FerryProcess.shell("curl -sk https://127.0.0.1:\(port)/inventory | jq -c '[.db, .tls, .readOnly, .deltaSync, .fingerprint]'")
            #expect(described.stdout == "[\"inventory\",true,false,false,\"\(after)\"]\n", "\(described.stdout)\(described.stderr)")
            let shown = try FerryProcess.ferry(["identity", "show", "--json"], in: a)
            #expect(shown.stdout.contains("\"sha256\": \"\(after)\""), "\(shown.stdout)")
            let mode = try FerryProcess.shell("stat -c %a .ferry/tls/anonymous.key", in: a).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(mode == "600")
            // The agent is the folder's one writer: an identity change beside it is refused.
            let beside = try FerryProcess.ferry(["identity", "create", "--cn", "other"], in: a)
            #expect(beside.status != 0 && beside.stderr.contains("stop the agent"), "\(beside.stderr)")
            #expect(!FileManager.default.fileExists(atPath: a + "/.ferry/tls/identity.pem"))
            listener.stop()
        }
    }

    @Test func theImportedSampleIdentityIsTheSampleCertificate() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a")
            try initFolder(a)
            let wrong = try FerryProcess.ferry(["identity", "import", samples + "/listener-cert-pkey.p12"], in: a, environment: ["FERRY_P12_PASSWORD": "nope"])
            #expect(wrong.status == 1 && wrong.stderr.contains("PKCS#12"), "\(wrong.stderr)")
            let imported = try FerryProcess.ferry(["identity", "import", samples + "/listener-cert-pkey.p12", "--password-file", samples + "/listener-cert-pkey.password"], in: a)
            #expect(imported.status == 0, "\(imported.stderr)")
            let expected = try FerryProcess.shell("openssl x509 -in \(samples)/listener-pinned-cert.cer -inform der -noout -fingerprint -sha256 | cut -d= -f2 | tr -d : | tr A-F a-f")
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try FerryProcess.ferry(["identity", "show"], in: a).stdout.contains(expected))
            #expect(try FerryProcess.shell("stat -c %a .ferry/tls/identity.key", in: a).stdout.hasPrefix("600"))
            #expect(try FerryProcess.ferry(["identity", "delete"], in: a).status == 0)
            #expect(try FerryProcess.ferry(["identity", "show"], in: a).status == 1)
            // Without an identity, --tls identity says what to do.
            let agent = try? RunningAgent(folder: a, arguments: ["--tls", "identity", "--interface", "127.0.0.1"], timeout: 5)
            #expect(agent == nil)
        }
    }

    /// Over `ferry-1` and over Couchbase Lite's BLIP (`--protocol cbl`): TLS is below both.
    @Test(arguments: SyncTests.wires) func clientCertificatesSignedByTheClientCAAreAcceptedOthersAndNoneRefused(wire: String) async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let made = try FerryProcess.shell(Self.makeCA + """
                openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr -subj /CN=client 2>/dev/null
                printf 'extendedKeyUsage=clientAuth\\nkeyUsage=critical,digitalSignature\\n' > ext
                openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile ext 2>/dev/null
                openssl pkcs12 -export -inkey client.key -in client.pem -out client.p12 -passout pass:secret
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout rogue.key -out rogue.pem -subj /CN=client -days 2 2>/dev/null
                openssl pkcs12 -export -inkey rogue.key -in rogue.pem -out rogue.p12 -passout pass:secret
                """, in: tmp.path)
            #expect(made.status == 0, "\(made.stderr)")
            let a = tmp.appending("a")
            try initFolder(a, sample: true)
            let listener = try serve(a, _extra: ["--client-ca", tmp.appending("ca.pem")])
            let url = try #require(listener.url)
            let env = ["FERRY_CLIENT_IDENTITY_PASSWORD": "secret"]
            let signed = try pull(url, into: tmp.appending("b1"), ["--protocol", wire, "--accept-self-signed", "--client-identity", tmp.appending("client.p12")], environment: env)
            #expect(signed.status == 0, "\(signed.stderr)")
            #expect(try sameList(a, tmp.appending("b1")))
            let rogue = try pull(url, into: tmp.appending("b2"), ["--protocol", wire, "--accept-self-signed", "--client-identity", tmp.appending("rogue.p12")], environment: env)
            #expect(rogue.status == 3, "\(rogue.stderr)")
            let none = try pull(url, into: tmp.appending("b3"), ["--protocol", wire, "--accept-self-signed"])
            #expect(none.status == 3, "\(none.stderr)")
            #expect(!FileManager.default.fileExists(atPath: tmp.appending("b2/samplelist.json")))
            #expect(!FileManager.default.fileExists(atPath: tmp.appending("b3/samplelist.json")))
            listener.stop()
        }
    }

    /// Certificates that cannot work are named for what is wrong with them, exit 3 at once
    /// (no retry) and nothing synced: a server certificate that expired, one that names
    /// another host, and a client certificate that expired. They were a BoringSSL or NIO error
    /// text with exit 1 after retries, or advice to pass the root that was passed already.
    @Test func expiredAndWrongHostCertificatesAreNamedForWhatIsWrong() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let made = try FerryProcess.shell(Self.makeCA + """
                mkdir db && : > db/index.txt && echo 1000 > db/serial
                printf '[ca]\ndefault_ca=c\n[c]\ndir=.\ndatabase=db/index.txt\nserial=db/serial\nnew_certs_dir=db\ndefault_md=sha256\npolicy=p\ncopy_extensions=copy\nunique_subject=no\n[p]\ncommonName=supplied\n' > ca.cnf
                sign() {
                    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$1 -addext "$4" -addext "$5" -keyout $1.key -out $1.csr 2>/dev/null
                    openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -startdate $2 -enddate $3 -in $1.csr -out $1.pem -notext 2>/dev/null
                    openssl pkcs12 -export -inkey $1.key -in $1.pem -out $1.p12 -passout pass:secret
                }
                past1=$(date -u -d '-60 days' +%y%m%d%H%M%SZ); past2=$(date -u -d '-30 days' +%y%m%d%H%M%SZ)
                now=$(date -u -d '-1 hour' +%y%m%d%H%M%SZ); later=$(date -u -d '+30 days' +%y%m%d%H%M%SZ)
                sign server-expired $past1 $past2 subjectAltName=IP:127.0.0.1 extendedKeyUsage=serverAuth
                sign server-elsewhere $now $later subjectAltName=DNS:example.org extendedKeyUsage=serverAuth
                sign client-expired $past1 $past2 subjectAltName=DNS:client extendedKeyUsage=clientAuth
                """, in: tmp.path)
            #expect(made.status == 0, "\(made.stderr)")
            let env = ["FERRY_P12_PASSWORD": "secret", "FERRY_CLIENT_IDENTITY_PASSWORD": "secret"]
            for (identity, expected) in [("server-expired", "presented a certificate that expired on "),
                                         ("server-elsewhere", "presented a certificate for example.org, not for 127.0.0.1")] {
                let a = tmp.appending(identity)
                try initFolder(a, sample: true)
                let imported = try FerryProcess.ferry(["identity", "import", tmp.appending(identity + ".p12")], in: a, environment: env)
                #expect(imported.status == 0, "\(imported.stderr)")
                let listener = try serve(a, _extra: ["--tls", "identity"])
                let refused = try pull(try #require(listener.url), into: tmp.appending(identity + "-copy"), ["--ca-file", tmp.appending("ca.pem")])
                listener.stop()
                #expect(refused.status == 3 && refused.stderr.contains(expected), "\(identity): \(refused.status) \(refused.stderr)")
                #expect(!refused.stderr.contains("retrying") && !refused.stderr.contains("Error") && !refused.stderr.contains("--ca-file with the root"),
                        "\(identity): \(refused.stderr)")
                #expect(!FileManager.default.fileExists(atPath: tmp.appending(identity + "-copy/samplelist.json")))
            }
            let a = tmp.appending("strict")
            try initFolder(a, sample: true)
            let listener = try serve(a, _extra: ["--client-ca", tmp.appending("ca.pem")])
            let expired = try pull(try #require(listener.url), into: tmp.appending("strict-copy"),
                                   ["--accept-self-signed", "--client-identity", tmp.appending("client-expired.p12")], environment: env)
            listener.stop()
            #expect(expired.status == 3 && expired.stderr.contains("CERTIFICATE_EXPIRED") && expired.stderr.contains("it has expired"), "\(expired.status) \(expired.stderr)")
            #expect(!expired.stderr.contains("retrying") && !expired.stderr.contains("tls_record.cc"), "\(expired.stderr)")
        }
    }

    @Test func passwordsOverTLSAreCheckedAndNeverShownByPs() async throws {
        try await endToEnd {
            let tmp = TemporaryDirectory()
            let a = tmp.appending("a"), b = tmp.appending("b")
            try initFolder(a, sample: true)
            try initFolder(b)
            let listener = try serve(a, _extra: ["--users", samples + "/userallowlist.json"])
            let url = try #require(listener.url)
            let wrong = try FerryProcess.ferry(["sync", url, "--accept-self-signed", "--user", "bob"], in: b, environment: ["FERRY_PASSWORD": "letmein"])
            #expect(wrong.status == 3 && wrong.stderr.contains("401"), "\(wrong.stderr)")
            let missing = try FerryProcess.ferry(["sync", url, "--accept-self-signed"], in: b)
            #expect(missing.status == 3 && missing.stderr.contains("401"), "\(missing.stderr)")
            // A continuous replicator with the right password: it syncs, and `ps` shows no password.
            try "password\n".write(toFile: tmp.appending("pw"), atomically: true, encoding: .utf8)
            let replicator = try RunningAgent(folder: b, arguments: ["--no-listen", "--peer", url, "--accept-self-signed",
                                                                     "--user", "bob", "--password-file", tmp.appending("pw")])
            #expect(eventually { FileManager.default.fileExists(atPath: b + "/samplelist.json") })
            let ps = try FerryProcess.shell("ps -eo args | grep '[f]erry'")
            #expect(ps.stdout.contains("--password-file") && !ps.stdout.contains(" password"), "\(ps.stdout)")
            #expect(!replicator.log().contains("password\n") && !replicator.log().contains("Basic "))
            replicator.stop()
            listener.stop()
        }
    }
}
