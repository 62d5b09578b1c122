#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// What the folder last recorded about each file — its fingerprint (inode, size, mtime,
/// ctime) and the body it held — so that a scan can skip files that did not change without
/// reading them, as git's index does. Kept in `.ferry/statcache`, one line per file:
/// `<inode> <size> <mtime ns> <ctime ns> <object hex> <doc as a JSON string>`.
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
    }

    /// Entries by document.
    public private(set) var entries: [DocumentID: Entry] = [:]
    /// True when entries changed since the last save.
    public private(set) var isDirty = false

    /// Files modified this close to a reference time are not trusted (nanoseconds).
    static let racyWindow = 2_000_000_000

    /// An empty cache.
    public init() {}

    /// Loads `path`, dropping entries that were racily clean when it was saved; a missing or
    /// unreadable cache is an empty one.
    public static func load(path: String) -> StatCache {
        var cache = StatCache()
        guard let st = try? FileSystem.lstat(path), let bytes = try? FileSystem.readFile(path) else { return cache }
        let saved = FileFingerprint(st).mtime
        for line in bytes.split(separator: 0x0A) {
            let fields = line.split(separator: 0x20, maxSplits: 5)
            guard fields.count == 6,
                  let ino = UInt64(String(decoding: fields[0], as: UTF8.self)),
                  let size = Int(String(decoding: fields[1], as: UTF8.self)),
                  let mtime = Int(String(decoding: fields[2], as: UTF8.self)),
                  let ctime = Int(String(decoding: fields[3], as: UTF8.self)),
                  let object = try? BlobDigest(hex: String(decoding: fields[4], as: UTF8.self)),
                  case .string(let text)? = try? JSONParser.parse(fields[5]),
                  let doc = try? DocumentID(text)
            else { continue }
            guard mtime < saved - racyWindow else { continue }
            cache.entries[doc] = Entry(fingerprint: FileFingerprint(inode: ino, size: size, mtime: mtime, ctime: ctime), object: object)
        }
        return cache
    }

    /// Writes the cache atomically.
    public mutating func save(path: String) throws(StoreError) {
        var out: [UInt8] = []
        out.reserveCapacity(entries.count * 140)
        for (doc, e) in entries {
            let f = e.fingerprint
            out += Array("\(f.inode) \(f.size) \(f.mtime) \(f.ctime) \(e.object.hex) ".utf8)
            out += JSONValue.string(doc.rawValue).canonicalBytes
            out.append(0x0A)
        }
        try FileSystem.writeAtomically(out, to: path, tempPrefix: "statcache.tmp-")
        isDirty = false
    }

    /// Records what a file held.
    public mutating func set(_ doc: DocumentID, _ entry: Entry?) {
        if entries[doc] != entry {
            entries[doc] = entry
            isDirty = true
        }
    }

    /// True when `fingerprint` proves the file still holds `current` without reading it.
    public func proves(_ doc: DocumentID, fingerprint: FileFingerprint, current: BlobDigest?, now: Int) -> Bool {
        guard let e = entries[doc], let current, e.object == current, e.fingerprint == fingerprint else { return false }
        return fingerprint.mtime < now - Self.racyWindow
    }
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
