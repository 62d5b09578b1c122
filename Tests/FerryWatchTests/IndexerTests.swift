import Foundation
import FerryStore
import FerryTesting
import FerryWatch
import Logging
import Testing

@Suite struct IndexerTests {
    /// A rescan while the agent runs (events were lost, `.ferryignore` changed) leaves ferry's
    /// temp files alone: a session may be writing one right now (a blob's copy lives as long
    /// as its fetch). A scan at startup removes what a killed writer left.
    @Test func aRescanLeavesTempFilesToTheSessionsWritingThem() throws {
        let tmp = TemporaryDirectory()
        let root = tmp.appending("folder")
        let store = try FolderStore.create(at: root, name: "folder")
        let temp = root + "/.ferry-tmp-in-flight"
        #expect(FileManager.default.createFile(atPath: temp, contents: Data("half a blob".utf8)))
        try Data("{\"a\": 1}\n".utf8).write(to: URL(fileURLWithPath: root + "/a.json"))
        let indexer = Indexer(store: store, logger: Logger(label: "test"))
        let recorded = try indexer.handle(.rescan(reason: "test"))
        #expect(recorded.map(\.doc.rawValue) == ["a.json"])
        #expect(FileManager.default.fileExists(atPath: temp))
        _ = try store.batch { try store.scanAndRecord() }
        #expect(!FileManager.default.fileExists(atPath: temp))
    }
}
