import CFerrySystem
import NIOWebSocket
import Synchronization

/// Masking keys for the frames a client sends. RFC 6455 (§5.3) wants each unpredictable, from
/// a strong source; NIO's `WebSocketMaskingKey.random()` asks the kernel for each one (a
/// `getrandom` system call per frame, and a client masks every frame: one per revision it
/// answers). These come from the same kernel source, 4 KiB per call.
struct MaskingKeySource: RandomNumberGenerator {
    private static let pool = Mutex(RandomPool())

    /// A fresh key.
    static func next() -> WebSocketMaskingKey {
        var source = MaskingKeySource()
        return .random(using: &source)
    }

    mutating func next() -> UInt64 {
        Self.pool.withLock { $0.next() }
    }
}

/// The kernel's random bytes, handed out 8 at a time, each byte once.
private struct RandomPool {
    private var bytes = [UInt8](repeating: 0, count: 4096)
    private var used = 4096

    mutating func next() -> UInt64 {
        if used + 8 > bytes.count {
            let filled = bytes.withUnsafeMutableBytes { ferry_random_bytes($0.baseAddress, UInt($0.count)) }
            // getrandom fails only without kernel support (before Linux 3.17): then one key at
            // a time as NIO draws them, from the system generator.
            if filled != 0 { var system = SystemRandomNumberGenerator(); return system.next() }
            used = 0
        }
        defer { used += 8 }
        return bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: used, as: UInt64.self) }
    }
}
