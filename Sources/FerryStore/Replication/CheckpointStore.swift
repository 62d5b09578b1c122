import FerryCore

/// Replication checkpoints kept in `.ferry/checkpoints/`, one file per client id: how far
/// a replication with one peer has got, so that a restart sends only what is new. Each save
/// bumps a revision number, and a save that names a stale revision is refused, so two
/// replicators cannot silently overwrite each other's progress.
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

    /// The store of a folder.
    public init(layout: FolderLayout) { directory = layout.stateDirectory + "/checkpoints" }

    /// The file of a client id (hex-encoded, so any id is a safe file name).
    func path(_ client: String) -> String {
        directory + "/" + Hex.encode(Array(client.utf8.prefix(120))) + ".json"
    }

    /// The checkpoint stored for `client`, if any (an unreadable file counts as none).
    public func get(_ client: String) -> Entry? {
        guard let bytes = try? FileSystem.readFile(path(client)), let value = try? JSONParser.parse(bytes),
              let rev = value["rev"]?.intValue, let local = value["local"]?.intValue, let remote = value["remote"]?.intValue
        else { return nil }
        return Entry(rev: rev, local: local, remote: remote)
    }

    /// Saves a checkpoint if `expectedRev` is the stored one (nil: none stored yet); returns
    /// the new entry, or throws `.invalidInput` naming the conflict.
    @discardableResult
    public func set(_ client: String, expectedRev: Int?, local: Int, remote: Int) throws(StoreError) -> Entry {
        let current = get(client)
        guard current?.rev == expectedRev else {
            throw StoreError(.invalidInput, "checkpoint \(client) is at revision \(current.map { String($0.rev) } ?? "none"), not \(expectedRev.map(String.init) ?? "none")")
        }
        let entry = Entry(rev: (current?.rev ?? 0) + 1, local: local, remote: remote)
        try FileSystem.makeDirectories(directory)
        let json: JSONValue = ["client": .string(client), "rev": .int(entry.rev), "local": .int(local), "remote": .int(remote), "time": .string(Timestamp.now())]
        try FileSystem.writeAtomically(json.prettyBytes, to: path(client), tempPrefix: ".checkpoint-tmp-")
        return entry
    }
}
