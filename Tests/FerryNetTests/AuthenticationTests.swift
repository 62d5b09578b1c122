import Foundation
import Testing
@testable import FerryNet

@Suite struct AuthenticationTests {
    static let samples: String = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/" && !FileManager.default.fileExists(atPath: dir.appendingPathComponent("samples/userallowlist.json").path) {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("samples").path
    }()

    @Test func theSampleAllowListLoadsAndChecksPasswords() throws {
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: Self.samples + "/userallowlist.json")))
        let users = try UserDirectory(fileBytes: bytes)
        #expect(users.count >= 4)
        #expect(users.check(user: "bob", password: "password"))
        #expect(!users.check(user: "bob", password: "Password"))
        #expect(!users.check(user: "mallory", password: "password"))
        #expect(!users.check(user: nil, password: nil))
    }

    @Test func hashedPasswordsInJSONLines() throws {
        let hash = try PasswordHash(hashing: "s3cret", rounds: PasswordHash.minimumRounds)
        #expect(PasswordHash(hash.description) == hash)
        let file = "{\"name\": \"alice\", \"password_hash\": \"\(hash)\"}\n\n{\"name\": \"bob\", \"password\": \"password\"}\n"
        let users = try UserDirectory(fileBytes: Array(file.utf8))
        #expect(users.check(user: "alice", password: "s3cret"))
        #expect(users.check(user: "alice", password: "s3cret"))   // second time from the cache
        #expect(!users.check(user: "alice", password: "secret"))
        #expect(users.check(user: "bob", password: "password"))
    }

    @Test(arguments: [
        ("[{\"name\": \"a\"}]", "neither password"),
        ("{\"name\": \"a\", \"password\": \"x\"}\n{\"name\": \"a\", \"password\": \"y\"}", "line 2: user \"a\" appears twice"),
        ("{\"name\": \"a\", \"password_hash\": \"md5$1$2\"}", "line 1: password_hash"),
        ("{\"name\": \"a\", \"password_hash\": \"pbkdf2-sha256$1000$c2FsdHNhbHQ=$AAAA\"}", "at least 210000 rounds"),
        ("{\"name\": ", "line 1: line 1, column 10"),
    ])
    func badUsersFilesAreRefusedClearly(text: String, expected: String) {
        do {
            _ = try UserDirectory(fileBytes: Array(text.utf8), source: "users.json")
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.message.hasPrefix("users.json: ") && error.message.contains(expected), "\(error.message)")
        }
    }

    @Test func basicCredentialsRoundTrip() {
        let header = BasicCredentials.header(user: "bob", password: "pa:ss wörd")
        #expect(header == "Basic " + Data("bob:pa:ss wörd".utf8).base64EncodedString())
        let (user, password) = BasicCredentials.parse(header)
        #expect(user == "bob" && password == "pa:ss wörd")
        #expect(BasicCredentials.parse("Bearer x").0 == nil)
        #expect(BasicCredentials.parse("Basic !!!").0 == nil)
    }
}
