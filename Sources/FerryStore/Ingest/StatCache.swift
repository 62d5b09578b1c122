#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import OrderedCollections

/// What the folder last recorded about each file — its fingerprint (inode, size, mtime,
/// ctime) and the body it held — so that a scan can skip files that did not change without
/// reading them, as git's index does. Kept in `.ferry/statcache`: a first line saying what
/// the writer's index held and which log it had read (`Summary`), then one line per file:
/// `<inode> <size> <mtime ns> <ctime ns> <object hex> <c|-> <doc as a JSON string>`, `c` when
/// the body was the document's current one when the cache was saved.
///
/// It is only a hint: an entry is trusted only when the fingerprint still matches, the body
/// is still the document's current one, and the file's mtime is more than two seconds older
/// than both the cache file and the scan ("racily clean" files are re-read, since two writes
/// in one timestamp tick can leave the same fingerprint).
public struct StatCache: Sendable {
    /// One file's entry.
    public struct Entry: Sendable, Equatable {
        /// The file's fingerprint when its content was recorded (or written by ferry).
        public var fingerprint: FileFingerprint
        /// The body it held then.
        public var object: BlobDigest
        /// Read from a cache that said the body was the document's current one when it was
        /// saved (`c`); false for entries made since.
        public var wasCurrent = false
        /// Read from a cache saved within `racyWindow` of the file's mtime: never proof.
        var racy = false

        /// An entry made now.
        public init(fingerprint: FileFingerprint, object: BlobDigest) {
            self.fingerprint = fingerprint
            self.object = object
        }

        /// The same file and body (whatever the cache it was read from said).
        func sameAs(_ other: Entry) -> Bool { fingerprint == other.fingerprint && object == other.object }

        /// True when a file found with `fingerprint` at `now` (wall-clock nanoseconds) provably
        /// still holds this entry's body.
        public func proves(_ fingerprint: FileFingerprint, now: Int) -> Bool {
            !racy && self.fingerprint == fingerprint && fingerprint.mtime < now - StatCache.racyWindow
        }
    }

    /// What the writer's index held when it saved the cache, and the fingerprint of the log it
    /// had read: a reader that finds the log unchanged knows the index without reading it.
    public struct Summary: Sendable, Equatable {
        /// `revs.log`'s fingerprint (any append or rewrite changes it).
        public var log: FileFingerprint
        /// The log's highest sequence.
        public var lastSeq: Int
        /// Log entries.
        public var revisions: Int
        /// Documents whose current revision is live.
        public var documents: Int
        /// True when each live document had an entry marked current and every entry was
        /// current: the files the cache proves are then the whole folder's state.
        public var complete: Bool
    }

    /// The summary read with the cache (nil: none, or a cache from before summaries), or the
    /// one last saved.
    public private(set) var summary: Summary?

    /// Entries by document, each in a box of its own, in an ordered dictionary (two arrays and a
    /// hash table of small integers): a `Dictionary` keeps up to twice as many slots as entries
    /// and grows by copying them all, so its slots cost more than the entries at 100,000
    /// documents (see docs/performance.md). A forgotten entry leaves nil in its place, since
    /// removing from the middle of the arrays would move everything after it; `set` drops
    /// them all once they are half the entries.
    private var boxes: OrderedDictionary<DocumentID, EntryBox?> = [:]
    /// How many of `boxes` are nil.
    private var forgotten = 0
    /// True when entries changed since the last save.
    public private(set) var isDirty = false

    /// Files modified this close to a reference time are not trusted (nanoseconds).
    static let racyWindow = 2_000_000_000

    /// An empty cache.
    public init() {}

    /// The entry of `doc`, if any.
    public subscript(doc: DocumentID) -> Entry? { boxes[doc]??.entry }

    /// Every entry, by document.
    public var entries: [DocumentID: Entry] {
        Dictionary(uniqueKeysWithValues: boxes.compactMap { doc, box in box.map { (doc, $0.entry) } })
    }

    /// Loads `path`; entries that were racily clean when it was saved are kept (a reader of the
    /// summary needs every entry) but never prove anything. A missing or unreadable cache is an
    /// empty one.
    public static func load(path: String) -> StatCache {
        var cache = StatCache()
        guard let st = try? FileSystem.lstat(path), let fd = try? FileSystem.open(path, O_RDONLY) else { return cache }
        defer { close(fd) }
        let saved = FileFingerprint(st).mtime
        // Sized once instead of regrown (rehashing 100,000 entries along the way was 3 % of a
        // restart's profile): a line is about this long.
        cache.boxes.reserveCapacity(Int(st.st_size) / Self.typicalLineBytes)
        // Read a megabyte at a time: the whole file beside the entries was the peak of an
        // agent's start in a large folder.
        var first = true
        _ = try? FileSystem.forEachLine(of: fd, path: path) { line in
            defer { first = false }
            if first, let summary = parseSummary(line) {
                cache.summary = summary
            } else if let (doc, read) = parseLine(line) {
                var entry = read
                entry.racy = entry.fingerprint.mtime >= saved - racyWindow
                cache.boxes[doc] = .some(EntryBox(entry))
            }
        }
        return cache
    }

    /// The summary of the cache at `path` alone (its first line), or nil.
    public static func readSummary(path: String) -> Summary? {
        guard let fd = try? FileSystem.open(path, O_RDONLY) else { return nil }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: summaryLineBytes)
        let n = head.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let end = head[..<n].firstIndex(of: 0x0A) else { return nil }
        return head.withUnsafeBufferPointer { parseSummary(UnsafeBufferPointer(rebasing: $0[..<end])) }
    }

    /// The first line's words: `ferry-statcache 2`, then the summary's numbers.
    static let summaryTag = "ferry-statcache 2"

    /// The summary line, or nil.
    private static func parseSummary(_ line: UnsafeBufferPointer<UInt8>) -> Summary? {
        let words = line.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        guard words.count == 10, words[0] + " " + words[1] == summaryTag, let inode = UInt64(words[2]) else { return nil }
        let numbers = words[3...].compactMap { Int($0) }
        guard numbers.count == 7, numbers[6] == 0 || numbers[6] == 1 else { return nil }
        return Summary(log: FileFingerprint(inode: inode, size: numbers[0], mtime: numbers[1], ctime: numbers[2]),
                       lastSeq: numbers[3], revisions: numbers[4], documents: numbers[5], complete: numbers[6] == 1)
    }

    /// About the length of one saved line (five numbers, a digest, a short name).
    static let typicalLineBytes = 128

    /// One line: five space-separated fields, then the doc as a JSON string.
    private static func parseLine(_ line: UnsafeBufferPointer<UInt8>) -> (DocumentID, Entry)? {
        var pos = 0
        func field() -> UnsafeBufferPointer<UInt8>? {
            let start = pos
            while pos < line.count, line[pos] != 0x20 { pos += 1 }
            guard pos < line.count else { return nil }
            defer { pos += 1 }
            return UnsafeBufferPointer(rebasing: line[start..<pos])
        }
        // Digits (a leading '-' where `signed`), nil on anything else or on overflow: a
        // damaged line is skipped, never a crash.
        func magnitude(_ f: UnsafeBufferPointer<UInt8>) -> UInt64? {
            guard !f.isEmpty else { return nil }
            var v: UInt64 = 0
            for b in f {
                guard b >= 48, b <= 57 else { return nil }
                let (times10, o1) = v.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(b - 48))
                if o1 || o2 { return nil }
                v = sum
            }
            return v
        }
        func number(_ f: UnsafeBufferPointer<UInt8>?, signed: Bool = false) -> Int? {
            guard let f else { return nil }
            if signed, f.first == 0x2D {
                guard let m = magnitude(UnsafeBufferPointer(rebasing: f.dropFirst())), m <= UInt64(Int.max) else { return nil }
                return -Int(m)
            }
            guard let m = magnitude(f), m <= UInt64(Int.max) else { return nil }
            return Int(m)
        }
        guard let inodeField = field(), let ino = magnitude(inodeField), let size = number(field()),
              let mtime = number(field(), signed: true), let ctime = number(field(), signed: true),
              let hex = field(), let object = BlobDigest(asciiHex: hex)
        else { return nil }
        // `c` or `-` (caches from before summaries have neither: the name follows the digest).
        var wasCurrent = false
        if pos < line.count, line[pos] != 0x22 {
            guard let mark = field(), mark.count == 1, mark[0] == 0x63 || mark[0] == 0x2D else { return nil }
            wasCurrent = mark[0] == 0x63
        }
        guard let text = jsonString(UnsafeBufferPointer(rebasing: line[pos...])), let doc = try? DocumentID(text) else { return nil }
        var entry = Entry(fingerprint: FileFingerprint(inode: ino, size: size, mtime: mtime, ctime: ctime), object: object)
        entry.wasCurrent = wasCurrent
        return (doc, entry)
    }

    /// The string a JSON string literal holds: read directly when it has no escapes (almost
    /// every path), else by the JSON parser.
    private static func jsonString(_ literal: UnsafeBufferPointer<UInt8>) -> String? {
        if literal.count >= 2, literal.first == 0x22, literal.last == 0x22 {
            let inner = UnsafeBufferPointer(rebasing: literal[1..<(literal.count - 1)])
            if !inner.contains(where: { $0 == 0x5C || $0 == 0x22 || $0 < 0x20 }) {
                return String(validating: inner, as: UTF8.self)
            }
        }
        guard case .string(let text)? = try? JSONParser.parse(buffer: literal) else { return nil }
        return text
    }

    /// Writes the cache atomically, a megabyte at a time (the whole text of 100,000 entries
    /// held at once was the peak of an initial sync's memory). `summary` (its `complete` is
    /// worked out here) says what the index held; `current` gives each document's current
    /// body, so that each entry is marked current or not. Without a summary (a batch's log
    /// lines not yet written) the file has no summary line.
    public mutating func save(path: String, summary: Summary?, current: (DocumentID) -> BlobDigest?) throws(StoreError) {
        let boxes = self.boxes
        var currentEntries = 0, otherEntries = 0
        // The summary line comes first but is known last: its place is kept with spaces.
        let placeholder = [UInt8](repeating: 0x20, count: Self.summaryLineBytes)
        try FileSystem.writeAtomically(to: path, tempPrefix: "statcache.tmp-") { (fd, temp) throws(StoreError) in
            var out: [UInt8] = summary == nil ? [] : placeholder
            out.reserveCapacity(Self.saveChunk)
            // Bytes appended directly: formatting each line through a String took ~90 ms per
            // 10,000 entries, at the end of every initial sync.
            for (doc, box) in boxes {
                // A racy entry read back and never re-read is not written again: saved under a
                // later mtime it would pass for proof. (Its live document then has no current
                // entry, so the summary is not complete.)
                guard let box, !box.entry.racy else { continue }
                let isCurrent = summary != nil && current(doc) == box.entry.object
                if isCurrent { currentEntries += 1 } else { otherEntries += 1 }
                Self.appendLine(doc, box.entry, isCurrent: isCurrent, to: &out)
                if out.count >= Self.saveChunk {
                    try FileSystem.writeAll(fd, out, path: temp)
                    out.removeAll(keepingCapacity: true)
                }
            }
            try FileSystem.writeAll(fd, out, path: temp)
            guard var summary else { return }
            summary.complete = otherEntries == 0 && currentEntries == summary.documents
            var line = Array("\(Self.summaryTag) \(summary.log.inode) \(summary.log.size) \(summary.log.mtime) \(summary.log.ctime) \(summary.lastSeq) \(summary.revisions) \(summary.documents) \(summary.complete ? 1 : 0)".utf8)
            guard line.count < Self.summaryLineBytes else { throw StoreError(.invalidInput, "stat cache summary too long") }
            line += [UInt8](repeating: 0x20, count: Self.summaryLineBytes - 1 - line.count) + [0x0A]
            if pwrite(fd, line, line.count, 0) != line.count { throw StoreError.system("cannot write", path: temp) }
            self.summary = summary
        }
        if summary == nil { self.summary = nil }
        isDirty = false
    }

    /// The summary line's length, spaces included (its numbers take at most ~170 bytes).
    static let summaryLineBytes = 256

    /// Bytes of lines written at once by `save`.
    static let saveChunk = 1 << 20

    /// Appends one entry's line.
    private static func appendLine(_ doc: DocumentID, _ e: Entry, isCurrent: Bool, to out: inout [UInt8]) {
        let f = e.fingerprint
        appendDecimal(f.inode, to: &out)
        out.append(0x20)
        appendDecimal(f.size, to: &out)
        out.append(0x20)
        appendDecimal(f.mtime, to: &out)
        out.append(0x20)
        appendDecimal(f.ctime, to: &out)
        out.append(0x20)
        e.object.appendHex(to: &out)
        out += isCurrent ? [0x20, 0x63, 0x20] : [0x20, 0x2D, 0x20]
        let name = doc.rawValue.utf8
        if name.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) {
            out.append(0x22)
            out += name
            out.append(0x22)
        } else {
            out += JSONValue.string(doc.rawValue).canonicalBytes
        }
        out.append(0x0A)
    }

    private static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value < 0 { out.append(0x2D) }
        appendDecimal(UInt64(value.magnitude), to: &out)
    }

    private static func appendDecimal(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        let start = out.count
        repeat {
            out.append(0x30 + UInt8(v % 10))
            v /= 10
        } while v > 0
        out[start...].reverse()
    }

    /// Records what a file held.
    public mutating func set(_ doc: DocumentID, _ entry: Entry?) {
        let known = boxes[doc]
        // A racy entry read back is replaced even by the same: it now holds proof.
        if let entry, let old = known??.entry, old.sameAs(entry), !old.racy { return }
        if entry == nil, known??.entry == nil { return }
        isDirty = true
        guard let entry else {
            guard known != nil else { return }  // no slot
            boxes[doc] = .some(nil)
            forgotten += 1
            if forgotten > 1024 && forgotten > boxes.count / 2 {
                boxes = boxes.filter { $0.value != nil }
                forgotten = 0
            }
            return
        }
        if case .some(.none) = known { forgotten -= 1 }
        boxes[doc] = .some(EntryBox(entry))
    }

    /// True when `fingerprint` proves the file still holds `current` without reading it.
    public func proves(_ doc: DocumentID, fingerprint: FileFingerprint, current: BlobDigest?, now: Int) -> Bool {
        guard let current else { return false }
        return provenObject(doc, fingerprint: fingerprint, now: now) == current
    }

    /// For each of `found`, the body the file provably still holds (nil: it must be read).
    public func provenObjects(_ found: [FolderScanner.Found]) -> [BlobDigest?] {
        let now = wallClockNanoseconds()
        return found.map { provenObject($0.doc, fingerprint: $0.fingerprint, now: now) }
    }

    /// The body the file provably still holds, by its `fingerprint` (nil: it must be read).
    public func provenObject(_ doc: DocumentID, fingerprint: FileFingerprint, now: Int) -> BlobDigest? {
        guard let e = boxes[doc]??.entry, e.proves(fingerprint, now: now) else { return nil }
        return e.object
    }
}

/// One entry on the heap (immutable: a change puts a new box in its slot).
private final class EntryBox: Sendable {
    let entry: StatCache.Entry
    init(_ entry: StatCache.Entry) { self.entry = entry }
}

extension FileFingerprint {
    /// A fingerprint from its fields.
    public init(inode: UInt64, size: Int, mtime: Int, ctime: Int) {
        self.inode = inode
        self.size = size
        self.mtime = mtime
        self.ctime = ctime
    }
}

/// Wall-clock nanoseconds (comparable with file mtimes).
func wallClockNanoseconds() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int(ts.tv_sec) * 1_000_000_000 + Int(ts.tv_nsec)
}
