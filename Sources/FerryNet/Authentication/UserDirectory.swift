import Crypto
import FerryCore
import NIOConcurrencyHelpers

/// The listener's users, from a `--users FILE`: a JSON array or JSON Lines of
/// `{"name": …, "password": …}` (the sample's plain form) or `{"name": …, "password_hash": …}`
/// (see `PasswordHash`).
public final class UserDirectory: Sendable {
    /// How one user's password is checked.
    enum Secret: Sendable {
        case plain([UInt8])
        case hashed(PasswordHash)
    }

    /// Why a users file was refused.
    public struct InvalidError: Error, Sendable, CustomStringConvertible {
        /// One sentence, with the line where it helps.
        public let message: String
        /// The sentence.
        public var description: String { message }
    }

    private let users: [String: Secret]
    /// A hash checked when the user is unknown, so that an unknown user costs what a known
    /// one does and user names cannot be probed by timing (nil when no user has a hash).
    private let decoy: PasswordHash?
    /// Successful checks of hashed passwords, so that a reconnecting replicator does not pay
    /// PBKDF2's deliberate cost (tens of milliseconds) on every connection.
    private let verified = NIOLockedValueBox<Set<[UInt8]>>([])

    /// Parses a users file's bytes.
    public init(fileBytes bytes: [UInt8], source: String = "users file") throws(InvalidError) {
        func fail(_ m: String) -> InvalidError { InvalidError(message: "\(source): \(m)") }
        var records: [(line: Int, value: JSONValue)] = []
        let trimmed = bytes.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        if trimmed.first == UInt8(ascii: "[") {
            do {
                guard case .array(let items) = try JSONParser.parse(bytes) else { throw fail("not a JSON array") }
                records = items.map { (0, $0) }
            } catch let e as InvalidError {
                throw e
            } catch {
                throw fail("\(error)")
            }
        } else {
            for (i, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
                guard line.contains(where: { $0 != 0x20 && $0 != 0x0D && $0 != 0x09 }) else { continue }
                do { records.append((i + 1, try JSONParser.parse(line))) } catch {
                    throw fail("line \(i + 1): \(error)")
                }
            }
        }
        var users: [String: Secret] = [:]
        for (line, record) in records {
            let at = line > 0 ? "line \(line): " : ""
            guard let name = record["name"]?.stringValue, !name.isEmpty else { throw fail("\(at)every user needs a \"name\"") }
            guard users[name] == nil else { throw fail("\(at)user \(String(reflecting: name)) appears twice") }
            if let hash = record["password_hash"]?.stringValue {
                guard let parsed = PasswordHash(hash) else {
                    throw fail("\(at)password_hash of \(String(reflecting: name)) is not pbkdf2-sha256$rounds$salt$key with at least \(PasswordHash.minimumRounds) rounds")
                }
                users[name] = .hashed(parsed)
            } else if let password = record["password"]?.stringValue {
                users[name] = .plain(Array(password.utf8))
            } else {
                throw fail("\(at)user \(String(reflecting: name)) has neither password nor password_hash")
            }
        }
        self.users = users
        let rounds = users.values.compactMap { if case .hashed(let h) = $0 { h.rounds } else { nil } }.max()
        self.decoy = rounds.flatMap { try? PasswordHash(password: "decoy", salt: Array(repeating: 0x5A, count: 16), rounds: $0) }
    }

    /// Number of users.
    public var count: Int { users.count }

    /// True when `user` exists and `password` is theirs. Unknown users and wrong passwords
    /// are indistinguishable to the caller.
    public func check(user: String?, password: String?) -> Bool {
        guard let user, let password, let secret = users[user] else {
            _ = decoy?.verify(password ?? "")
            return false
        }
        switch secret {
        case .plain(let expected):
            return constantTimeEqual(Array(password.utf8), expected)
        case .hashed(let hash):
            // Remember a digest of the pair, not the password itself.
            let token = Array(SHA256.hash(data: Array("\(user)\u{0}\(password)".utf8)))
            if verified.withLockedValue({ $0.contains(token) }) { return true }
            guard hash.verify(password) else { return false }
            verified.withLockedValue { _ = $0.insert(token) }
            return true
        }
    }

    /// True, cheaply, when this user and password were verified before (no PBKDF2).
    public func wasVerified(user: String?, password: String?) -> Bool {
        guard let user, let password, case .hashed = users[user] else { return false }
        let token = Array(SHA256.hash(data: Array("\(user)\u{0}\(password)".utf8)))
        return verified.withLockedValue { $0.contains(token) }
    }

    /// This directory as a listener's password check.
    public var passwordCheck: PasswordCheck { { [self] user, password in self.check(user: user, password: password) } }

    /// This directory's cheap check of credentials verified before.
    public var recentlyVerified: PasswordCheck { { [self] user, password in self.wasVerified(user: user, password: password) } }
}
