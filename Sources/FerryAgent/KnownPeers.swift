import FerryCore
import FerryStore

/// Fingerprints pinned on first use (`.ferry/known-peers.json`): the first time a peer is
/// found over DNS-SD its advertised certificate fingerprint is remembered; later, a different
/// one is refused with a warning instead of trusted (SSH's known_hosts, for ferry peers).
public struct KnownPeers {
    /// The file.
    public let path: String

    /// The known peers of the folder laid out by `layout`.
    public init(layout: FolderLayout) { path = layout.stateDirectory + "/known-peers.json" }

    /// Fingerprint by peer id.
    public func load() throws -> [String: String] { try entries().compactMapValues { $0["fingerprint"]?.stringValue } }

    /// The file's entries as written (peer id → `{fingerprint, name}`); empty when there is no
    /// file yet. A file that cannot be read or parsed fails closed: forgetting it would trust
    /// again, on first use, every peer whose fingerprint it pinned.
    private func entries() throws -> [String: JSONValue] {
        guard FileSystem.exists(path) else { return [:] }
        guard let bytes = try? FileSystem.readFile(path), let json = try? JSONParser.parse(bytes), case .object(let o) = json else {
            throw StoreError(.corrupt, "\(path) is not a readable JSON object of pinned fingerprints; no discovered peer is trusted until it is fixed or removed")
        }
        return o
    }

    /// What to do with a peer advertising `fingerprint`.
    public enum Verdict: Equatable {
        /// First time: now remembered.
        case pinnedNow
        /// Same as remembered.
        case known
        /// Different from what was remembered (the old one is returned).
        case changed(from: String)
    }

    /// Checks `fingerprint` for peer `id` (named `name`), remembering it if it is new.
    public func check(id: String, name: String, fingerprint: String) throws -> Verdict {
        var all = try entries()
        if let known = all[id]?["fingerprint"]?.stringValue { return known == fingerprint ? .known : .changed(from: known) }
        all[id] = ["fingerprint": .string(fingerprint), "name": .string(name)]
        try FileSystem.writeAtomically(JSONValue.object(all).prettyBytes, to: path)
        return .pinnedNow
    }
}
