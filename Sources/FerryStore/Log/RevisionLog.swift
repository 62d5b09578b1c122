#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// `revs.log`: JSON Lines, append-only. Each append is one `write` of whole lines followed by
/// `fdatasync`, so a revision is durable before anyone hears of it. A torn last line (a crash
/// mid-write) is ignored when reading and cut off when a writer opens the log.
public final class RevisionLog {
    /// The log's path.
    public let path: String
    private var fd: Int32 = -1
    /// Byte length of the log's valid part.
    public private(set) var length: Int = 0

    /// What reading the log found.
    public struct ReadResult {
        /// Every valid entry, in file order.
        public var entries: [LogEntry] = []
        /// Lines that could not be decoded (1-based line number and why), not counting a torn tail.
        public var damagedLines: [(line: Int, reason: String)] = []
        /// Bytes of an incomplete last line, ignored (0 when the log ends cleanly).
        public var tornTailBytes: Int = 0
        /// Byte length up to the end of the last complete line.
        public var validLength: Int = 0
        /// The highest `"seq"` found in a damaged line (0: none): new entries number above it,
        /// so that a sequence is never used twice even when a line cannot be read back.
        public var highestDamagedSeq: Int = 0
    }

    init(path: String) { self.path = path }

    deinit { if fd >= 0 { close(fd) } }

    /// Reads and decodes the whole log.
    public static func read(path: String) throws(StoreError) -> ReadResult {
        var entries: [LogEntry] = []
        var result = try scan(path: path) { entries.append($0) }
        result.entries = entries
        return result
    }

    /// Reads the log and hands each valid entry to `body` as it is decoded, keeping none:
    /// opening a folder builds its index this way (the returned result has no entries).
    public static func scan(path: String, chunkSize: Int = 1 << 20, _ body: (LogEntry) -> Void) throws(StoreError) -> ReadResult {
        let fd: Int32
        do { fd = try FileSystem.open(path, O_RDONLY) } catch where error.errno == ENOENT {
            return ReadResult()
        }
        defer { close(fd) }
        // A chunk at a time, not whole: a large log need not be in memory at once beside the
        // index it builds (docs/performance.md).
        var result = ReadResult()
        var lines = 0
        result.tornTailBytes = try FileSystem.forEachLine(of: fd, path: path, chunkSize: chunkSize) { line in
            lines += 1
            decodeLine(line, number: lines, into: &result, body)
            result.validLength += line.count + 1
        }
        return result
    }

    /// Decodes log bytes into a result with every entry; exposed for tests and the benchmark.
    public static func decode(_ bytes: [UInt8]) -> ReadResult {
        var entries: [LogEntry] = []
        var result = decode(bytes) { entries.append($0) }
        result.entries = entries
        return result
    }

    /// Decodes log bytes, handing each valid entry to `body`.
    static func decode(_ bytes: [UInt8], _ body: (LogEntry) -> Void) -> ReadResult {
        var result = ReadResult()
        var lines = 0
        let used = bytes.withUnsafeBufferPointer { decodeLines($0, lines: &lines, into: &result, body) }
        // No newline after the last bytes: a torn last line, whatever it holds.
        result.tornTailBytes = bytes.count - used
        return result
    }

    /// Decodes the complete lines of `buf` (the log's bytes from its start), handing each
    /// valid entry to `body`; returns the bytes used (through the last newline) and counts the
    /// lines and the valid length in `result`.
    private static func decodeLines(_ buf: UnsafeBufferPointer<UInt8>, lines: inout Int,
                                    into result: inout ReadResult, _ body: (LogEntry) -> Void) -> Int {
        var start = 0
        while start < buf.count {
            guard let nl = UnsafeBufferPointer(rebasing: buf[start...]).firstIndex(of: 0x0A) else { break }
            lines += 1
            let end = start + nl
            decodeLine(UnsafeBufferPointer(rebasing: buf[start..<end]), number: lines, into: &result, body)
            start = end + 1
            result.validLength = start
        }
        return start
    }

    /// Decodes line number `number` (without its newline): a valid entry goes to `body`, a
    /// damaged one into `result` (an empty line is neither).
    private static func decodeLine(_ line: UnsafeBufferPointer<UInt8>, number: Int, into result: inout ReadResult, _ body: (LogEntry) -> Void) {
        guard !line.isEmpty else { return }
        do {
            if let entry = try LogEntry.fastDecode(line) {
                body(entry)
            } else {
                body(try LogEntry(json: try JSONParser.parse(buffer: line)))
            }
        } catch {
            result.damagedLines.append((number, "\(error)"))
            result.highestDamagedSeq = max(result.highestDamagedSeq, seqField(of: line) ?? 0)
        }
    }

    /// The number after the first `"seq":` of a line, if one is there.
    static func seqField(of line: UnsafeBufferPointer<UInt8>) -> Int? {
        let key = Array(#""seq":"#.utf8)
        guard line.count > key.count else { return nil }
        for start in 0...(line.count - key.count) where line[start] == key[0] {
            guard line[start..<(start + key.count)].elementsEqual(key) else { continue }
            var value = 0, i = start + key.count, digits = 0
            while i < line.count, digits < 18, (0x30...0x39).contains(line[i]) {
                value = value * 10 + Int(line[i] - 0x30)
                i += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
    }

    /// Opens for appending; cuts off a torn tail first (the only rewrite the log ever gets).
    func openForAppend(validLength: Int) throws(StoreError) {
        fd = try FileSystem.open(path, O_WRONLY | O_CREAT | O_APPEND, mode: 0o644)
        var st = stat()
        if fstat(fd, &st) != 0 { throw StoreError.system("cannot stat", path: path) }
        if Int(st.st_size) > validLength {
            if ftruncate(fd, off_t(validLength)) != 0 { throw StoreError.system("cannot repair torn line in", path: path) }
            try FileSystem.sync(fd, path: path)
        }
        length = validLength
    }

    /// Appends entries with one write and one fdatasync. On failure the log is cut back to its
    /// previous length so that no partial line stays behind (e.g. on a full disk).
    func append(_ entries: [LogEntry]) throws(StoreError) {
        precondition(fd >= 0, "log not opened for writing")
        guard !entries.isEmpty else { return }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(entries.count * 300)
        for e in entries {
            buffer += e.encodedLine()
            buffer.append(0x0A)
        }
        do {
            try FileSystem.writeAll(fd, buffer, path: path)
            try FileSystem.sync(fd, path: path)
        } catch {
            _ = ftruncate(fd, off_t(length))
            throw error
        }
        length += buffer.count
    }

    /// Replaces the whole log atomically with `entries` (used by `compact`).
    func rewrite(_ entries: [LogEntry]) throws(StoreError) {
        var buffer: [UInt8] = []
        for e in entries {
            buffer += e.encodedLine()
            buffer.append(0x0A)
        }
        try FileSystem.writeAtomically(buffer, to: path, tempPrefix: "revs.log.tmp-")
        if fd >= 0 { close(fd) }
        fd = try FileSystem.open(path, O_WRONLY | O_APPEND)
        length = buffer.count
    }
}
