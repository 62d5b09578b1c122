import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// Frames leave a session in the order it numbered them, even when the transport's writes
/// take varying times (a CI run once failed with "request number 4 does not increase": two
/// `getAttachment` requests, numbered in order, reached the wire swapped).
@Suite struct OrderedWritesTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func aPullOverAJitteryTransportKeepsRequestNumbersIncreasing() async throws {
        let tmp = TemporaryDirectory()
        let source = tmp.appending("inventory"), target = tmp.appending("copy")
        #expect(try FerryProcess.ferry(["init", "--sample", source]).status == 0)
        // Several documents with blobs: their revisions are served at once, each fetching its
        // blobs with its own requests, so requests are numbered by concurrent tasks.
        _ = try FerryProcess.shell("for i in 1 2 3 4 5 6; do head -c 100000 /dev/urandom > \(source)/photo$i.bin; done")
        #expect(try FerryProcess.ferry(["scan"], in: source).status == 0)
        let targetStore = try FolderStore.create(at: target, name: "inventory")
        let sourceStore = try FolderStore.open(at: source, writable: true)

        // Up to 2 ms per write: the sample's many blobs are fetched by concurrent requests,
        // so unordered writes would swap some of them.
        let (active, passive) = LoopbackTransport.pair(jitter: .milliseconds(2))
        let stats = try await loopbackPull(active: active, passive: passive, from: SharedStore(sourceStore), into: SharedStore(targetStore), logger: logger)
        #expect(stats.revisionsReceived >= 1 && stats.blobsReceived >= 50, "\(stats)")
        let a = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(source)/samplelist.json"))))
        let b = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(target)/samplelist.json"))))
        #expect(a == b)
        for i in 1...6 {
            #expect(try Data(contentsOf: URL(fileURLWithPath: "\(source)/photo\(i).bin")) == Data(contentsOf: URL(fileURLWithPath: "\(target)/photo\(i).bin")))
        }
        #expect(try FerryProcess.ferry(["verify"], in: target).status == 0)
    }
}
