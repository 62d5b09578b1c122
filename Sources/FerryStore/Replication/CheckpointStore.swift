#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// Replication checkpoints kept in `.ferry/checkpoints/`, one file per client id: how far
/// a replication with one peer has got, so that a restart sends only what is new. Each save
/// bumps a revision number, and a save that names a stale revision is refused, so two
/// replicators cannot silently overwrite each other's progress. Sessions read and write them
/// through the store's actor (`SharedStore.perform`), the folder's one writer. At most
/// `defaultCapacity` are kept (the least recently saved goes), and client ids are bounded, so
/// peers inventing client ids cannot fill the disk.
public struct CheckpointStore: Sendable {
    /// A stored checkpoint.
    public struct Entry: Sendable, Equatable {
        /// Its revision (increases on every save).
        public var rev: Int
        /// Highest local sequence the peer has acknowledged (push).
        public var local: Int
        /// Highest peer sequence applied here (pull).
        public var remote: Int
    }

    /// `.ferry/checkpoints`.
    public let directory: String

    /// Most checkpoints this store keeps (`defaultCapacity` but in tests).
    public let capacity: Int

    /// The store of a folder.
    public init(layout: FolderLayout, capacity: Int = Self.defaultCapacity) {
        directory = layout.stateDirectory + "/checkpoints"
        self.capacity = capacity
    }

    /// Most checkpoints kept.
    public static let defaultCapacity = 1_000
    /// Longest client id accepted, in bytes (hex-encoded it stays within a file name).
    public static let maxClientBytes = 120

    /// The file of a client id (hex-encoded, so any id is a safe file name).
    func path(_ client: String) -> String {
        directory + "/" + Hex.encode(Array(client.utf8)) + ".json"
    }

    /// Why `client` cannot name a checkpoint, or nil.
    public static func clientRefusal(_ client: String) -> String? {
        client.isEmpty || client.utf8.count > maxClientBytes ? "a checkpoint's client id has 1 to \(maxClientBytes) bytes" : nil
    }

    /// The checkpoint stored for `client`, if any (an unreadable file counts as none).
    public func get(_ client: String) -> Entry? {
        guard Self.clientRefusal(client) == nil, let bytes = try? FileSystem.readFile(path(client)), let value = try? JSONParser.parse(bytes),
              let rev = value["rev"]?.intValue, let local = value["local"]?.intValue, let remote = value["remote"]?.intValue
        else { return nil }
        return Entry(rev: rev, local: local, remote: remote)
    }

    /// Saves a checkpoint if `expectedRev` is the stored one (nil: none stored yet); returns
    /// the new entry, or throws `.invalidInput` naming the conflict.
    @discardableResult
    public func set(_ client: String, expectedRev: Int?, local: Int, remote: Int) throws(StoreError) -> Entry {
        if let why = Self.clientRefusal(client) { throw StoreError(.invalidInput, why) }
        let current = get(client)
        guard current?.rev == expectedRev else {
            throw StoreError(.invalidInput, "checkpoint \(client) is at revision \(current.map { String($0.rev) } ?? "none"), not \(expectedRev.map(String.init) ?? "none")")
        }
        let entry = Entry(rev: (current?.rev ?? 0) + 1, local: local, remote: remote)
        try FileSystem.makeDirectories(directory)
        if current == nil { try makeRoom() }
        let json: JSONValue = ["client": .string(client), "rev": .int(entry.rev), "local": .int(local), "remote": .int(remote), "time": .string(Timestamp.now())]
        try FileSystem.writeAtomically(json.prettyBytes, to: path(client), tempPrefix: ".checkpoint-tmp-")
        return entry
    }

    /// Removes the least recently saved checkpoints until a new one fits in `capacity`.
    private func makeRoom() throws(StoreError) {
        let names = try FileSystem.listDirectory(directory).filter { $0.hasSuffix(".json") }
        guard names.count >= capacity else { return }
        var dated: [(time: Int, name: String)] = []
        for name in names {
            guard let st = try FileSystem.lstat(directory + "/" + name) else { continue }
            dated.append((st.st_mtim.tv_sec * 1_000_000_000 + st.st_mtim.tv_nsec, name))
        }
        for old in dated.sorted(by: { $0.time < $1.time }).prefix(names.count - capacity + 1) {
            unlink(directory + "/" + old.name)
        }
    }
}
