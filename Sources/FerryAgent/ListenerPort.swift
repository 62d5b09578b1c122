import FerryStore
import Foundation

/// The port this folder's listener used last (`.ferry/listener-port`, one number), so that a
/// peer's `--peer URL` still works after a restart without `--port`.
struct ListenerPort {
    let path: String

    /// The file of the folder laid out as `layout`.
    init(layout: FolderLayout) { path = layout.stateDirectory + "/listener-port" }

    /// The saved port, if there is a valid one.
    func read() -> Int? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), (1...65535).contains(port) else { return nil }
        return port
    }

    /// Keeps `port` for the next start (a failure to write only costs the next start its port).
    func save(_ port: Int) {
        guard read() != port else { return }
        try? FileSystem.writeAtomically(Array("\(port)\n".utf8), to: path)
    }
}

/// The listener could not bind: the port is taken, said in a sentence that says what to do.
public struct ListenError: Error, Sendable, CustomStringConvertible {
    /// The sentence.
    public let description: String
    /// An error.
    public init(_ description: String) { self.description = description }
}
