import FerryCore
import Foundation

/// `.ferry/folder.json`: `{"id": <uuid>, "name": <db name>, "created": <RFC 3339>, "format": 2}`.
public struct FolderInfo: Sendable, Equatable {
    /// The folder's unique id; also this peer's id in other folders' logs.
    public var id: String
    /// The database name (defaults to the folder's name).
    public var name: String
    /// When the folder was initialized.
    public var created: String
    /// On-disk format version.
    public var format: Int

    /// The format this build writes: 2 since small JSON bodies are packed (`BodyPacks`), which
    /// a ferry of format 1 would not find (it refuses format 2 rather than misread it).
    public static let currentFormat = 2
    /// The formats this build reads; a writer upgrades a folder of format 1 when it opens it
    /// (`FolderStore.upgradeFormat`): format 2 is format 1 plus packs.
    public static let readableFormats = 1...2

    /// A new folder's info, with a random id unless given one.
    public init(name: String, id: String? = nil) {
        self.id = id ?? UUID().uuidString.lowercased()
        self.name = name
        self.created = Timestamp.now()
        self.format = Self.currentFormat
    }

    /// Decodes `folder.json`.
    public init(json: JSONValue) throws(StoreError) {
        guard let id = json["id"]?.stringValue, let name = json["name"]?.stringValue,
              let format = json["format"]?.intValue
        else { throw StoreError(.corrupt, "folder.json lacks id, name or format") }
        guard Self.readableFormats.contains(format) else {
            throw StoreError(.corrupt, "folder.json has format \(format); this ferry reads formats \(Self.readableFormats.lowerBound) to \(Self.readableFormats.upperBound)")
        }
        self.id = id
        self.name = name
        self.created = json["created"]?.stringValue ?? ""
        self.format = format
    }

    /// The JSON form.
    public var json: JSONValue {
        ["id": .string(id), "name": .string(name), "created": .string(created), "format": .int(format)]
    }
}
