import FerryCore

/// Installs the inventory sample (SPEC §7) into a folder: every list item gets an `image`
/// blob reference to its picture (or the default picture), whose bytes go into `objects/`.
public struct SampleInstaller {
    /// The `samples/` directory to read from.
    public let samplesDirectory: String

    /// An installer reading `samplesDirectory`.
    public init(samplesDirectory: String) { self.samplesDirectory = samplesDirectory }

    /// Finds `samples/`: `$FERRY_SAMPLES`, then `share/ferry/samples` beside the binary's
    /// prefix, then the nearest `samples/` above the binary (a build inside the source tree).
    public static func locate(executable: String, environment: [String: String]) -> String? {
        func valid(_ dir: String) -> Bool { FileSystem.exists(dir + "/samplelist.json") }
        if let env = environment["FERRY_SAMPLES"], valid(env) { return env }
        var dir = FileSystem.dirname(of: executable)
        let prefixShare = FileSystem.dirname(of: dir) + "/share/ferry/samples"
        if valid(prefixShare) { return prefixShare }
        while !dir.isEmpty && dir != "/" {
            if valid(dir + "/samples") { return dir + "/samples" }
            dir = FileSystem.dirname(of: dir)
        }
        return nil
    }

    /// The file name of an item's picture: its key in lower case, spaces as dashes, `.jpg`.
    public static func imageName(forKey key: String) -> String {
        key.lowercased().replacingSpaces() + ".jpg"
    }

    /// Stores the pictures and writes `samplelist.json` into the folder (refusing to replace
    /// an existing one). The caller records it like any other file.
    public func install(into store: FolderStore) throws(StoreError) {
        let target = store.layout.path(of: "samplelist.json")
        if FileSystem.exists(target) {
            throw StoreError(.invalidInput, "\(target) already exists; not replacing it with the sample")
        }
        let bytes = try FileSystem.readFile(samplesDirectory + "/samplelist.json")
        guard case .object(var list)? = try? JSONParser.parse(bytes), case .array(let items)? = list["list"] else {
            throw StoreError(.corrupt, "\(samplesDirectory)/samplelist.json is not an inventory list")
        }
        var withImages: [JSONValue] = []
        for item in items {
            guard case .object(var fields) = item, let key = fields["key"]?.stringValue else {
                withImages.append(item)
                continue
            }
            var picture = samplesDirectory + "/images/" + Self.imageName(forKey: key)
            if !FileSystem.exists(picture) { picture = samplesDirectory + "/images/default.jpg" }
            let (digest, size) = try store.objects.importFile(at: picture)
            fields["image"] = BlobReference(digest: digest, length: size, contentType: "image/jpeg").json
            withImages.append(.object(fields))
        }
        list["list"] = .array(withImages)
        try FileSystem.writeAtomically(JSONValue.object(list).prettyBytes, to: target)
    }
}

extension String {
    func replacingSpaces() -> String { String(map { $0 == " " ? "-" : $0 }) }
}
