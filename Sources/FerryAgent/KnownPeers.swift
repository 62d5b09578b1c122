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
    public func load() -> [String: String] { entries().compactMapValues { $0["fingerprint"]?.stringValue } }

    /// The file's entries as written (peer id → `{fingerprint, name}`); empty when absent or unreadable.
    private func entries() -> [String: JSONValue] {
        guard let bytes = try? FileSystem.readFile(path), let json = try? JSONParser.parse(bytes), case .object(let o) = json else { return [:] }
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
        var all = entries()
        if let known = all[id]?["fingerprint"]?.stringValue { return known == fingerprint ? .known : .changed(from: known) }
        all[id] = ["fingerprint": .string(fingerprint), "name": .string(name)]
        try FileSystem.writeAtomically(JSONValue.object(all).prettyBytes, to: path)
        return .pinnedNow
    }
}
