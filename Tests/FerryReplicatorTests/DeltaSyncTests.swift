import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// Delta sync between two real sessions over a loopback connection: a one-field edit of a
/// large document travels as a few hundred bytes, only when both sides agreed on it, and a
/// delta the receiver cannot use (base missing, or not rebuilding the announced revision)
/// is refused and replaced by the whole body.
@Suite struct DeltaSyncTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    let doc = try! DocumentID("list.json")

    /// A list of `count` items of ~200 bytes each (5,000: about 1 MB), item `edited` changed.
    static func list(_ count: Int = 5000, edited: Int? = nil, to value: Int = -1) -> JSONValue {
        .object(["title": "inventory", "items": .array((0..<count).map { i in
            .object(["name": .string("item \(i)"), "count": .int(i == edited ? value : i), "note": .string(String(repeating: "n", count: 160))])
        })])
    }

    /// A transport that lets a test rewrite the text frames one end sends.
    final class TamperingTransport: MessageTransport, @unchecked Sendable {
        let inner: LoopbackTransport
        let rewrite: @Sendable ([UInt8]) -> [UInt8]
        init(_ inner: LoopbackTransport, rewrite: @escaping @Sendable ([UInt8]) -> [UInt8]) {
            self.inner = inner
            self.rewrite = rewrite
        }
        var inbound: TransportInbox { inner.inbound }
        func enqueue(_ message: TransportMessage) -> TransportWrite {
            guard case .text(let bytes) = message else { return inner.enqueue(message) }
            return inner.enqueue(.text(rewrite(bytes)))
        }
        func close(code: UInt16, reason: String) async { await inner.close(code: code, reason: reason) }
        var closeDescription: String? { inner.closeDescription }
    }

    /// Pulls once from `source` (a passive session offering `sourceFeatures`) into `target`
    /// (an active one offering delta); `rewrite` may alter what the source sends.
    func pull(from source: SharedStore, into target: SharedStore, sourceFeatures: [String],
              rewrite: @escaping @Sendable ([UInt8]) -> [UInt8] = { $0 }) async throws -> ReplicationStats {
        let (active, passive) = LoopbackTransport.pair()
        return try await loopbackPull(active: active, passive: TamperingTransport(passive, rewrite: rewrite), from: source, into: target,
                                      sourceFeatures: sourceFeatures, targetFeatures: [ProtocolFeature.delta], logger: logger)
    }

    func current(_ shared: SharedStore) async throws -> JSONValue {
        let doc = self.doc
        return try await shared.perform { store in
            guard let node = store.index[doc]?.current else { throw StoreError(.notFound, "no \(doc)") }
            return try store.jsonBody(of: node, doc: doc)
        }
    }

    func stores() throws -> (TemporaryDirectory, SharedStore, SharedStore) {
        let tmp = TemporaryDirectory()
        let source = SharedStore(try FolderStore.create(at: tmp.appending("source"), name: "inventory"))
        let target = SharedStore(try FolderStore.create(at: tmp.appending("target"), name: "inventory"))
        return (tmp, source, target)
    }

    @Test func aOneFieldEditOfALargeDocumentTravelsAsASmallDeltaOnlyWhenBothAgree() async throws {
        let (tmp, source, target) = try stores()
        _ = tmp
        let doc = self.doc
        _ = try await source.perform { try $0.recordLocalJSON(doc, Self.list()) }
        let first = try await pull(from: source, into: target, sourceFeatures: [ProtocolFeature.delta])
        #expect(first.revisionsReceived == 1 && first.bytesReceived > 1_000_000, "\(first)")  // nothing to diff against yet

        _ = try await source.perform { try $0.recordLocalJSON(doc, Self.list(edited: 2345)) }
        let delta = try await pull(from: source, into: target, sourceFeatures: [ProtocolFeature.delta])
        #expect(delta.revisionsReceived == 1, "\(delta)")
        #expect(delta.bytesReceived + delta.bytesSent < 2048, "\(delta.bytesReceived) received, \(delta.bytesSent) sent")
        #expect(try await current(target) == Self.list(edited: 2345))
        // The same revision id on both sides: the receiver rebuilt exactly the sender's body.
        let sourceRev = await source.perform { $0.index[doc]?.current?.rev }
        let targetRev = await target.perform { $0.index[doc]?.current?.rev }
        #expect(sourceRev == targetRev)

        // A listener without delta sync: the whole body.
        _ = try await source.perform { try $0.recordLocalJSON(doc, Self.list(edited: 2345, to: -2)) }
        let whole = try await pull(from: source, into: target, sourceFeatures: [])
        #expect(whole.revisionsReceived == 1 && whole.bytesReceived > 1_000_000, "\(whole)")
        #expect(try await current(target) == Self.list(edited: 2345, to: -2))
    }

    /// Rewrites the `rev` frames that carry a delta with `change`; counts them.
    final class DeltaRewriter: @unchecked Sendable {
        let lock = NSLock()
        var count = 0
        let change: @Sendable (inout [String: JSONValue]) -> Void
        init(_ change: @escaping @Sendable (inout [String: JSONValue]) -> Void) { self.change = change }
        func rewrite(_ bytes: [UInt8]) -> [UInt8] {
            guard case .object(var o) = try? JSONParser.parse(bytes), o["type"] == "rev", o["delta"] != nil else { return bytes }
            change(&o)
            lock.withLock { count += 1 }
            return JSONValue.object(o).canonicalBytes
        }
    }

    @Test func aDeltaTheReceiverCannotUseIsRefusedAndTheWholeBodyFollows() async throws {
        let (tmp, source, target) = try stores()
        _ = tmp
        let doc = self.doc
        _ = try await source.perform { try $0.recordLocalJSON(doc, Self.list(200)) }
        _ = try await pull(from: source, into: target, sourceFeatures: [ProtocolFeature.delta])

        let cases: [(String, DeltaRewriter)] = [
            // Applies cleanly but is not the announced revision: the id check catches it.
            ("a delta that does not rebuild the revision", DeltaRewriter { $0["delta"] = ["injected": true] }),
            // A base the receiver never had.
            ("a delta against a revision the receiver lacks", DeltaRewriter { $0["deltaSrc"] = .string("1-" + String(repeating: "0", count: 32)) }),
        ]
        for (i, (what, rewriter)) in cases.enumerated() {
            let edited = Self.list(200, edited: 7, to: -10 - i)
            _ = try await source.perform { try $0.recordLocalJSON(doc, edited) }
            let stats = try await pull(from: source, into: target, sourceFeatures: [ProtocolFeature.delta]) { rewriter.rewrite($0) }
            #expect(rewriter.lock.withLock { rewriter.count } == 1, "\(what): the delta was not sent")
            #expect(stats.revisionsReceived == 1, "\(what): \(stats)")
            #expect(try await current(target) == edited, "\(what)")
            let valid = await target.perform { store in (try? store.verify())?.isClean ?? false }
            #expect(valid, "\(what): the target folder does not verify")
        }
    }
}
