import Foundation

/// A fresh directory under the system's temp folder, removed when the value goes away.
public final class TemporaryDirectory: @unchecked Sendable {
    /// Its absolute path.
    public let path: String

    /// Creates `…/ferry-test-XXXXXX` in `base` (default: the system's temp folder).
    public init(prefix: String = "ferry-test", in base: String? = nil) {
        var template = Array(((base ?? NSTemporaryDirectory()) + "/\(prefix)-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A path inside it.
    public func appending(_ relative: String) -> String { path + "/" + relative }

    /// Writes a file (creating directories).
    public func write(_ relative: String, _ text: String) throws {
        let full = appending(relative)
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: full))
    }

    /// Reads a file as text.
    public func read(_ relative: String) throws -> String {
        String(decoding: try Data(contentsOf: URL(fileURLWithPath: appending(relative))), as: UTF8.self)
    }

    deinit {
        // Objects are 0444 inside 0755 directories: removal needs no chmod.
        try? FileManager.default.removeItem(atPath: path)
    }
}
