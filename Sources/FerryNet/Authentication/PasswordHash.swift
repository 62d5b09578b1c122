import Crypto
import _CryptoExtras

/// A salted, slow password hash: PBKDF2-HMAC-SHA256, written
/// `pbkdf2-sha256$<rounds>$<salt, base64>$<32-byte key, base64>` (Django's layout).
public struct PasswordHash: Sendable, Equatable, CustomStringConvertible {
    /// Rounds used for new hashes (OWASP's 2023 figure for PBKDF2-SHA256 is 600,000).
    public static let defaultRounds = 600_000
    /// Fewest rounds accepted when reading a hash (swift-crypto's floor).
    public static let minimumRounds = 210_000

    /// Iterations.
    public let rounds: Int
    /// The salt.
    public let salt: [UInt8]
    /// The derived key.
    public let key: [UInt8]

    /// Hashes `password` with a fresh random 16-byte salt.
    public init(hashing password: String, rounds: Int = PasswordHash.defaultRounds) throws {
        var rng = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
        try self.init(password: password, salt: salt, rounds: rounds)
    }

    init(password: String, salt: [UInt8], rounds: Int) throws {
        self.rounds = rounds
        self.salt = salt
        self.key = try Self.derive(password, salt: salt, rounds: rounds)
    }

    /// Parses the text form; nil when it is not one this build can check.
    public init?(_ text: String) {
        let parts = text.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "pbkdf2-sha256", let rounds = Int(parts[1]), rounds >= Self.minimumRounds,
              let salt = Base64.decode(String(parts[2])), salt.count >= 8,
              let key = Base64.decode(String(parts[3])), key.count == 32
        else { return nil }
        self.rounds = rounds
        self.salt = salt
        self.key = key
    }

    /// True when `password` derives the same key (compared in constant time).
    public func verify(_ password: String) -> Bool {
        guard let derived = try? Self.derive(password, salt: salt, rounds: rounds) else { return false }
        return constantTimeEqual(derived, key)
    }

    /// The text form.
    public var description: String { "pbkdf2-sha256$\(rounds)$\(Base64.encode(salt))$\(Base64.encode(key))" }

    private static func derive(_ password: String, salt: [UInt8], rounds: Int) throws -> [UInt8] {
        let key = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32, rounds: rounds)
        return key.withUnsafeBytes { Array($0) }
    }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var diff: UInt8 = 0
    for i in a.indices { diff |= a[i] ^ b[i] }
    return diff == 0
}
