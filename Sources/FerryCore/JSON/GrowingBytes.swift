/// Bytes written through a pointer into memory of their own, doubled when full; the owner
/// frees it (`free`) once it has taken a copy (`array`).
struct GrowingBytes {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// The bytes written.
    private(set) var count = 0

    /// Empty, with room for `capacity` bytes before it grows.
    init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    /// Room for `more` bytes after those written.
    @inline(__always) private mutating func reserve(_ more: Int) {
        if count + more > capacity { grow(to: count + more) }
    }

    private mutating func grow(to needed: Int) {
        let larger = max(capacity * 2, needed)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.update(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    /// One byte.
    @inline(__always) mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    /// Two bytes.
    @inline(__always) mutating func append(_ first: UInt8, _ second: UInt8) {
        reserve(2)
        base[count] = first
        base[count + 1] = second
        count += 2
    }

    /// A copy of `bytes`.
    @inline(__always) mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
        guard let from = bytes.baseAddress else { return }
        reserve(bytes.count)
        if bytes.count <= 16 {
            // Most runs are a few bytes (a key, a number), for which a call to `memmove`
            // costs more than the copy.
            for k in 0..<bytes.count { base[count + k] = from[k] }
        } else {
            (base + count).update(from: from, count: bytes.count)
        }
        count += bytes.count
    }

    /// `byte`, `times` times.
    @inline(__always) mutating func append(_ byte: UInt8, times: Int) {
        reserve(times)
        for k in 0..<times { base[count + k] = byte }
        count += times
    }

    /// Calls `body` with the bytes written (valid until the next append).
    func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: base, count: count))
    }

    /// Calls `body` with the bytes written, to rewrite them in place.
    func withUnsafeMutableBufferPointer<R>(_ body: (UnsafeMutableBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try body(UnsafeMutableBufferPointer(start: base, count: count))
    }

    /// A copy of the bytes written.
    var array: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Frees the memory; nothing may be used after.
    func free() { base.deallocate() }
}
