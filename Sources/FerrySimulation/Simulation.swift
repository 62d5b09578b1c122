import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting
import Foundation
import Logging

/// How peers are connected: who may replicate with whom.
enum Topology: String, CaseIterable, Sendable {
    /// 0 – 1 – 2 – …
    case chain
    /// Everyone with peer 0.
    case star
    /// A ring plus random chords: cycles.
    case mesh

    /// The pairs that replicate, in a fixed order.
    func edges(peers: Int, rng: inout SeededGenerator) -> [(Int, Int)] {
        switch self {
        case .chain: return (1..<peers).map { ($0 - 1, $0) }
        case .star: return (1..<peers).map { (0, $0) }
        case .mesh:
            var edges = (1..<peers).map { ($0 - 1, $0) }
            if peers > 2 { edges.append((peers - 1, 0)) }
            for a in 0..<peers {
                for b in (a + 2)..<max(a + 2, peers) where !(a == 0 && b == peers - 1) && rng.next() % 3 == 0 {
                    edges.append((a, b))
                }
            }
            return edges
        }
    }
}

/// What one seed's run found.
public struct SimulationOutcome: Sendable {
    /// The seed.
    public let seed: UInt64
    /// Why it failed, one sentence each (empty: it passed).
    public let failures: [String]
    /// What it did, step by step.
    public let trace: [String]
    /// Peers, topology, edits, passes and revisions, in one line.
    public let summary: String
    /// A digest of every peer's final revisions and files: equal for two runs of one seed.
    public let fingerprint: String

    /// True when every check held.
    public var passed: Bool { failures.isEmpty }
}

/// A deterministic simulation of 2 to 6 peers (FoundationDB's idea, with the real code): real
/// folders opened by the real store, replicating through real `PeerSession`s over the
/// in-memory transport, while simulated users edit, delete and re-create documents the way
/// editors do (in place, from stale copies, through invalid intermediate states), connections
/// are cut in the middle of a pass and peers restart. One seed drives every choice, and the
/// whole run takes turns on one thread (`SerialTaskExecutor`), so a seed replays exactly.
///
/// After the random steps it replicates along every edge until nothing moves, then checks:
/// identical files and identical revision sets on every peer, no open conflict, every file
/// showing its current revision, no revision made by a further round (no ping-pong), and no
/// lost edit (`EditHistory`).
public final class Simulation {
    /// The documents users edit: three JSON documents (one in a directory) and a file.
    static let documents = ["a.json", "b.json", "sub/c.json", "notes.txt"].map { try! DocumentID($0) }
    static let fields = ["f0", "f1", "f2", "f3"]

    let seed: UInt64
    private var rng: SeededGenerator
    private let base: TemporaryDirectory
    private let clock = SimulatedClock()
    /// Where the peers' stores run (the run's turn-taking thread; nil: threads of their own).
    private let storeExecutor: (any SerialExecutor)?
    private var peers: [SimulatedPeer] = []
    private var edges: [(Int, Int)] = []
    private var history = EditHistory()
    private var trace: [String] = []
    private var passes = 0
    private let quiet = Logger(label: "ferry.sim", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A simulation for `seed`, its folders under `directory` (a RAM-backed one by default).
    public init(seed: UInt64, directory: String? = nil, storeExecutor: (any SerialExecutor)? = nil) {
        self.seed = seed
        self.storeExecutor = storeExecutor
        // Mixed first: SplitMix64 streams from nearby states are shifted copies of each other.
        var mixer = SeededGenerator(seed: seed)
        self.rng = SeededGenerator(seed: mixer.next())
        self.base = TemporaryDirectory(prefix: "ferry-sim-\(seed)", in: directory ?? Self.defaultDirectory)
    }

    /// `/dev/shm` when it is writable (fsync costs nothing there), else the temp folder.
    static var defaultDirectory: String? {
        access("/dev/shm", W_OK) == 0 ? "/dev/shm" : nil
    }

    /// Runs one seed on a thread of its own and returns what it found.
    public static func run(seed: UInt64, directory: String? = nil) async -> SimulationOutcome {
        let executor = SerialTaskExecutor(name: "ferry-sim-\(seed)")
        defer { executor.shutdown() }
        return await withTaskExecutorPreference(executor) {
            await Simulation(seed: seed, directory: directory, storeExecutor: executor.serialExecutor).run()
        }
    }

    // MARK: The run

    func run() async -> SimulationOutcome {
        var failures: [String] = []
        let count = 2 + Int(rng.next() % 5)
        let topology = Topology.allCases[Int(rng.next() % 3)]
        edges = topology.edges(peers: count, rng: &rng)
        do {
            for i in 0..<count { peers.append(try SimulatedPeer(index: i, root: base.appending("peer\(i)"), clock: clock, storeExecutor: storeExecutor)) }
            note("\(count) peers, \(topology.rawValue): \(edges.map { "\($0.0)-\($0.1)" }.joined(separator: " "))")
            let steps = 12 + count * 6
            for step in 0..<steps {
                clock.advance(seconds: 5)
                try await randomStep(step)
            }
            failures += try await settle()
            if failures.isEmpty { failures += try await check() }
        } catch {
            failures.append("the simulation itself failed: \(error)")
        }
        if !failures.isEmpty, let logs = try? await logDump() { trace += logs }
        let revisions = (try? await revisionSets().first?.count) ?? 0
        let summary = "\(count) peers (\(topology.rawValue), \(edges.count) edges), \(history.edits.count) edits, \(passes) passes, \(revisions) revisions"
        return SimulationOutcome(seed: seed, failures: failures, trace: trace, summary: summary,
                                 fingerprint: (try? await fingerprint()) ?? "")
    }

    private func note(_ line: String) { trace.append(line) }

    private func pick<T>(_ items: [T]) -> T { items[Int(rng.next() % UInt64(items.count))] }

    private func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

    private func randomStep(_ step: Int) async throws {
        let roll = rng.next() % 100
        let peer = pick(peers)
        let doc = pick(Self.documents)
        switch roll {
        case 0..<42:
            try await edit(peer, doc, label: "step \(step)")
        case 42..<47:
            try await delete(peer, doc, label: "step \(step)")
        case 47..<67:
            try await randomPass(label: "step \(step)", cut: false)
        case 67..<77:
            try await concurrentPasses(label: "step \(step)")
        case 77..<84:
            try await randomPass(label: "step \(step)", cut: true)
        case 84..<89:
            try await staleSave(peer, doc, label: "step \(step)")
        case 89..<93:
            try await invalidThenFixed(peer, doc, label: "step \(step)")
        case 93..<97:
            try await unrecordedSaveThenPass(peer, doc, label: "step \(step)")
        default:
            note("step \(step): restart peer \(peer.index)")
            try peer.restart()
        }
    }

    // MARK: Edits

    /// An edit of what the file holds now, recorded at once (as the agent's watcher does).
    private func edit(_ peer: SimulatedPeer, _ doc: DocumentID, label: String) async throws {
        let seen = await knowledge(peer, doc)
        let (bytes, writes, creates) = mutate(peer.file(doc), doc: doc, id: history.nextID)
        try peer.write(doc, bytes)
        try await record(peer, doc, writes: writes, creates: creates, seen: seen, label: "\(label): peer \(peer.index) edits \(doc)")
    }

    /// A deletion of the document's file, recorded at once.
    private func delete(_ peer: SimulatedPeer, _ doc: DocumentID, label: String) async throws {
        guard peer.file(doc) != nil else { return }
        let seen = await knowledge(peer, doc)
        try peer.remove(doc)
        let outcome = try await peer.shared.perform { store in try store.ingest(doc) }
        guard case .deleted(let entry?) = outcome else {
            note("\(label): peer \(peer.index) deletes \(doc): nothing recorded (\(outcome))")
            return
        }
        let id = history.nextID
        history.add(Edit(id: id, peer: peer.index, doc: doc, writes: [Write(place: .exists, value: .absent)], seen: seen,
                         isDeletion: true, rewritesDocument: false, rev: entry.rev))
        note("\(label): peer \(peer.index) deletes \(doc) as e\(id) -> \(entry.rev)")
    }

    /// A save made from the content read before a peer's revision was written (an editor or
    /// script that read, then wrote back while ferry installed the revision).
    private func staleSave(_ peer: SimulatedPeer, _ doc: DocumentID, label: String) async throws {
        note("\(label): peer \(peer.index) reads \(doc), then a peer's pass arrives")
        try await saveAfterPass(peer, doc, from: peer.file(doc), seen: await knowledge(peer, doc), label: label, what: "saves it from its stale copy")
    }

    /// A JSON document saved invalid (mid-edit), a peer's pass meanwhile, then the fixed save.
    private func invalidThenFixed(_ peer: SimulatedPeer, _ doc: DocumentID, label: String) async throws {
        guard doc.kind == .json, let before = peer.file(doc) else { return }
        let seen = await knowledge(peer, doc)
        try peer.write(doc, Array("{\"f0\": ".utf8))
        let outcome = try await peer.shared.perform { store in try store.ingest(doc) }
        note("\(label): peer \(peer.index) saves \(doc) invalid (\(outcome)), then a peer's pass arrives")
        try await saveAfterPass(peer, doc, from: before, seen: seen, label: label, what: "fixes it")
    }

    /// A pass into `peer`, then a save of `doc` made from `before` (what was read earlier).
    private func saveAfterPass(_ peer: SimulatedPeer, _ doc: DocumentID, from before: [UInt8]?, seen: Set<Int>,
                               label: String, what: String) async throws {
        try await passInto(peer, label: label)
        let (bytes, writes, creates) = mutate(before, doc: doc, id: history.nextID)
        try peer.write(doc, bytes)
        try await record(peer, doc, writes: writes, creates: creates, seen: seen, label: "\(label): peer \(peer.index) \(what) (\(doc))")
    }

    /// A save the agent has not recorded yet when a peer's pass arrives: the pass records it
    /// first, as a child of what the file held.
    private func unrecordedSaveThenPass(_ peer: SimulatedPeer, _ doc: DocumentID, label: String) async throws {
        let seen = await knowledge(peer, doc)
        let id = history.nextID
        let (bytes, writes, creates) = mutate(peer.file(doc), doc: doc, id: id)
        try peer.write(doc, bytes)
        note("\(label): peer \(peer.index) saves \(doc) (e\(id)) [\(writes.map(\.description).joined(separator: ", "))], unrecorded, then a peer's pass arrives")
        let before = await peer.shared.perform { $0.index.lastSeq }
        try await passInto(peer, label: label)
        let digest = doc.kind == .json ? BlobDigest.of((try JSONParser.parse(bytes)).canonicalBytes) : BlobDigest.of(bytes)
        // Recorded during the pass, if the pass touched the document (a save can bring back an
        // older revision's exact content: only a revision recorded since counts).
        var rev: RevisionID? = await peer.shared.perform { store -> RevisionID? in
            store.changes(since: before, docIDs: [doc]).first { $0.origin == "local" && $0.object == digest && !$0.deleted }?.rev
        }
        if rev == nil {
            if case .recorded(let e) = try await peer.shared.perform({ store in try store.ingest(doc) }) { rev = e.rev }
        }
        guard let rev else {
            note("\(label): e\(id) was never recorded")
            return
        }
        history.add(Edit(id: id, peer: peer.index, doc: doc, writes: writes, seen: seen, isDeletion: false, rewritesDocument: creates, rev: rev))
        note("\(label): e\(id) recorded as \(rev)")
    }

    /// Records the save just written to `doc`'s file.
    private func record(_ peer: SimulatedPeer, _ doc: DocumentID, writes: [Write], creates: Bool, seen: Set<Int>, label: String) async throws {
        let id = history.nextID
        let outcome = try await peer.shared.perform { store in try store.ingest(doc) }
        guard case .recorded(let entry) = outcome else {
            let debug = await peer.shared.perform { store in "file=\(String(decoding: (try? FileSystem.readFile(store.layout.path(of: doc.rawValue))) ?? [], as: UTF8.self)) current=\(store.current(doc).map { "\($0.rev) \(String(decoding: (try? store.body(of: $0, doc: doc)) ?? [], as: UTF8.self))" } ?? "none") fileRev=\(store.fileRevision(doc)?.description ?? "none")" }
            note("\(label): nothing recorded (\(outcome)) writes \(writes) \(debug)")
            return
        }
        history.add(Edit(id: id, peer: peer.index, doc: doc, writes: writes, seen: seen, isDeletion: false, rewritesDocument: creates, rev: entry.rev))
        note("\(label) as e\(id) [\(writes.map(\.description).joined(separator: ", "))] -> \(entry.rev) (parent \(entry.parent?.description ?? "none"))")
    }

    /// What a save of `doc` made on `peer` now has seen: the edits behind the revision its
    /// file shows (its ancestry through parents and merges). An edit on a branch that was
    /// deleted is in the log but not in the file, so it is not seen. When the file does not
    /// show a revision (unreadable, or it changed), every edit in the log counts as seen.
    private func knowledge(_ peer: SimulatedPeer, _ doc: DocumentID) async -> Set<Int> {
        let revisions = history.revisions(of: doc)
        let bytes = peer.file(doc)
        return await peer.shared.perform { store in
            guard let tree = store.index[doc] else { return [] }
            var shown: RevisionID?
            if let held = store.fileRevision(doc), let node = tree.nodes[held] {
                if node.deleted {
                    if bytes == nil { shown = held }
                } else if let bytes, let object = node.object {
                    let digest = doc.kind == .json ? (try? JSONParser.parse(bytes)).map { BlobDigest.of($0.canonicalBytes) } : BlobDigest.of(bytes)
                    if digest == object { shown = held }
                }
            }
            guard let shown else { return Set(revisions.filter { tree.nodes[$0.rev].map { $0.seq != 0 } ?? false }.map(\.id)) }
            let ancestry = tree.ancestry(of: shown)
            return Set(revisions.filter { ancestry.contains($0.rev) }.map(\.id))
        }
    }

    /// A random change of a document's content (creating it when `current` is nil); the
    /// values written are tagged with the edit's number, so each is unique.
    private func mutate(_ current: [UInt8]?, doc: DocumentID, id: Int) -> ([UInt8], [Write], Bool) {
        let tag = "e\(id)"
        if doc.kind == .file {
            var writes = [Write(place: .content, value: .text(tag))]
            if current == nil { writes.append(Write(place: .exists, value: .present)) }
            return (Array("\(tag)\n".utf8), writes, current == nil)
        }
        guard let current, case .object(var o)? = try? JSONParser.parse(current) else {
            // Created anew (or over an unreadable file).
            var o: [String: JSONValue] = [:]
            var writes = [Write(place: .exists, value: .present)]
            for key in Self.fields where chance(50) {
                o[key] = .string(tag + key)
                writes.append(Write(place: .field(key), value: .text(tag + key)))
            }
            let items = (0..<Int(rng.next() % 3)).map { "\(tag).\($0)" }
            o["list"] = .array(items.map { .string($0) })
            for item in items { writes.append(Write(place: .item(item), value: .present)) }
            o["rows"] = .array((0..<3).map { ["id": .string("r\($0)"), "v": .string("\(tag)r\($0)")] })
            for r in 0..<3 { writes.append(Write(place: .row("r\(r)"), value: .text("\(tag)r\(r)"))) }
            return (JSONValue.object(o).prettyBytes, writes, true)
        }
        var writes: [Write] = []
        var touched: Set<Place> = []
        var n = 0
        let changes = 1 + Int(rng.next() % 2)
        while writes.count < changes {
            n += 1
            let value = "\(tag).\(n)"
            var list = o["list"]?.arrayValue ?? []
            var rows = o["rows"]?.arrayValue ?? []
            switch rng.next() % 6 {
            case 0, 1:
                let key = pick(Self.fields)
                guard touched.insert(.field(key)).inserted else { continue }
                o[key] = .string(value)
                writes.append(Write(place: .field(key), value: .text(value)))
            case 2:
                guard let key = Self.fields.filter({ o[$0] != nil }).randomElement(using: &rng),
                      touched.insert(.field(key)).inserted else { continue }
                o[key] = nil
                writes.append(Write(place: .field(key), value: .absent))
            case 3:
                list.insert(.string(value), at: Int(rng.next() % UInt64(list.count + 1)))
                touched.insert(.item(value))
                writes.append(Write(place: .item(value), value: .present))
            case 4:
                guard !list.isEmpty else { continue }
                let i = Int(rng.next() % UInt64(list.count))
                guard let item = list[i].stringValue, touched.insert(.item(item)).inserted else { continue }
                list.remove(at: i)
                writes.append(Write(place: .item(item), value: .absent))
            default:
                guard !rows.isEmpty else { continue }
                let i = Int(rng.next() % UInt64(rows.count))
                guard case .object(var row) = rows[i], let rowID = row["id"]?.stringValue,
                      touched.insert(.row(rowID)).inserted else { continue }
                row["v"] = .string(value)
                rows[i] = .object(row)
                writes.append(Write(place: .row(rowID), value: .text(value)))
            }
            o["list"] = .array(list)
            o["rows"] = .array(rows)
        }
        return (JSONValue.object(o).prettyBytes, writes, false)
    }

    // MARK: Replication

    private func randomPass(label: String, cut: Bool) async throws {
        try await run([randomPlan(cut: cut)], label: label)
    }

    /// A pass along a random edge, either way, pushing or pulling, cut after a random number
    /// of messages when `cut`.
    private func randomPlan(cut: Bool) -> PassPlan {
        let (a, b) = pick(edges)
        let (active, passive) = chance(50) ? (a, b) : (b, a)
        let direction: ReplicationDirection = chance(50) ? .push : .pull
        return PassPlan(active: active, passive: passive, direction: direction, cutAfter: cut ? 1 + Int(rng.next() % 40) : nil)
    }

    /// A pass from a random neighbour into `peer`.
    private func passInto(_ peer: SimulatedPeer, label: String) async throws {
        let neighbours = edges.compactMap { $0.0 == peer.index ? $0.1 : $0.1 == peer.index ? $0.0 : nil }
        guard !neighbours.isEmpty else { return }
        let other = pick(neighbours)
        if chance(50) {
            try await pass(active: other, passive: peer.index, .push, cutAfter: nil, label: label)
        } else {
            try await pass(active: peer.index, passive: other, .pull, cutAfter: nil, label: label)
        }
    }

    /// Two to four passes at once along random edges (a peer may be in several): their
    /// sessions take turns on the run's thread, as an agent's replications with several peers
    /// interleave, so a peer merges branches while it sends (what made rings of agents merge
    /// twins for ever before twins were closed).
    private func concurrentPasses(label: String) async throws {
        let plans = (0..<(2 + Int(rng.next() % 3))).map { _ in randomPlan(cut: false) }
        try await run(plans, label: label)
    }

    /// One one-shot replication between two peers over the in-memory transport; `cutAfter`
    /// cuts the connection once the side sending revisions has sent that many messages.
    private func pass(active: Int, passive: Int, _ direction: ReplicationDirection, cutAfter: Int?, label: String) async throws {
        try await run([PassPlan(active: active, passive: passive, direction: direction, cutAfter: cutAfter)], label: label)
    }

    /// Runs these passes at once; each ends on its own (done, or cut).
    private func run(_ plans: [PassPlan], label: String) async throws {
        passes += plans.count
        var sessions: [(server: PeerSession, client: PeerSession, direction: ReplicationDirection)] = []
        var whats: [String] = []
        for plan in plans {
            let (activeEnd, passiveEnd) = LoopbackTransport.pair()
            var activeTransport: MessageTransport = activeEnd, passiveTransport: MessageTransport = passiveEnd
            if let cutAfter = plan.cutAfter {
                if plan.direction == .pull { passiveTransport = CutLoopbackTransport(passiveEnd, after: cutAfter) }
                else { activeTransport = CutLoopbackTransport(activeEnd, after: cutAfter) }
            }
            let features = chance(50) ? [ProtocolFeature.delta] : []
            let server = PeerSession(transport: passiveTransport, shared: peers[plan.passive].shared, role: .passive, features: features, logger: quiet)
            let client = PeerSession(transport: activeTransport, shared: peers[plan.active].shared, role: .active, remoteDatabase: "sim",
                                     features: features, logger: quiet)
            sessions.append((server, client, plan.direction))
            let what = plan.direction == .push ? "\(plan.active) pushes to \(plan.passive)" : "\(plan.active) pulls from \(plan.passive)"
            whats.append("\(what)\(plan.cutAfter.map { ", cut after \($0) messages" } ?? "")\(features.isEmpty ? "" : ", deltas")")
        }
        let before = try await revisionCounts()
        let outcomes = await withTaskGroup(of: (Int, String)?.self) { group in
            for (i, session) in sessions.enumerated() {
                group.addTask { await session.server.run(); return nil }
                group.addTask { await session.client.run(); return nil }
                group.addTask {
                    var outcome = "done"
                    do {
                        try await session.client.open()
                        try await session.client.replicate(session.direction, continuous: false)
                    } catch {
                        outcome = "ended: \(error)"
                    }
                    await session.client.close()
                    return (i, outcome)
                }
            }
            var outcomes = [String](repeating: "", count: sessions.count)
            for await case let (i, outcome)? in group { outcomes[i] = outcome }
            return outcomes
        }
        let after = try await revisionCounts()
        let passes = zip(whats, outcomes).map { "\($0): \($1)" }.joined(separator: plans.count > 1 ? "; at once, " : "")
        note("\(label): \(plans.count > 1 ? "at once, " : "")\(passes); revisions \(before) -> \(after)")
    }

    /// A pass to run: who dials whom, which way, and when its connection is cut (nil: never).
    private struct PassPlan {
        let active: Int
        let passive: Int
        let direction: ReplicationDirection
        let cutAfter: Int?
    }

    private func revisionCounts() async throws -> [Int] {
        var counts: [Int] = []
        for peer in peers { counts.append(await peer.shared.perform { $0.index.revisionCount }) }
        return counts
    }

    /// Replicates along every edge, both ways, until a round moves nothing; then one more
    /// round must record nothing at all (no ping-pong).
    private func settle() async throws -> [String] {
        let rounds = 3 * peers.count + 6
        for round in 0..<rounds {
            let before = try await revisionCounts()
            for (a, b) in edges {
                try await pass(active: a, passive: b, .push, cutAfter: nil, label: "settle \(round)")
                try await pass(active: a, passive: b, .pull, cutAfter: nil, label: "settle \(round)")
            }
            if try await revisionCounts() == before {
                return []
            }
        }
        return ["still making revisions after \(rounds) rounds of replication along every edge (ping-pong)"]
    }

    // MARK: Checks

    private func revisionSets() async throws -> [Set<String>] {
        var sets: [Set<String>] = []
        for peer in peers {
            sets.append(try await peer.shared.perform { store in Set(try store.readLogEntries().map { "\($0.doc) \($0.rev)" }) })
        }
        return sets
    }

    private func check() async throws -> [String] {
        var failures: [String] = []
        let sets = try await revisionSets()
        for (i, set) in sets.enumerated().dropFirst() where set != sets[0] {
            failures.append("peer \(i) and peer 0 hold different revisions: \(set.subtracting(sets[0]).sorted().prefix(3)) only on \(i), \(sets[0].subtracting(set).sorted().prefix(3)) only on 0")
        }
        for doc in Self.documents {
            let files = peers.map { $0.file(doc) }
            if Set(files.map { $0.map { Data($0) } }).count > 1 { failures.append("\(doc) differs between peers") }
        }
        for peer in peers {
            let (open, pending, unreadable, counted) = try await peer.shared.perform { store in
                let disk = try store.diskState()
                return (store.index.trees.filter { $0.value.hasConflict }.map(\.key.rawValue), disk.pending.map { "\($0.doc) \($0.change)" },
                        disk.unreadable.map(\.doc.rawValue), (store.index.liveDocumentCount, store.index.liveDocuments.count))
            }
            if counted.0 != counted.1 { failures.append("peer \(peer.index) counts \(counted.0) live documents and has \(counted.1)") }
            if !open.isEmpty { failures.append("peer \(peer.index) has open conflicts: \(open)") }
            if !pending.isEmpty { failures.append("peer \(peer.index)'s files differ from their current revisions: \(pending)") }
            if !unreadable.isEmpty { failures.append("peer \(peer.index) has unreadable files: \(unreadable)") }
        }
        var final: [DocumentID: FinalDocument] = [:]
        for doc in Self.documents {
            guard let bytes = peers[0].file(doc) else { final[doc] = .deleted; continue }
            if doc.kind == .json {
                final[doc] = FinalDocument(json: (try? JSONParser.parse(bytes)) ?? .null)
            } else {
                final[doc] = FinalDocument(text: String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .newlines))
            }
        }
        failures += history.lostWrites(final: final)
        return failures
    }

    /// Every peer's log, a line per revision with its body: the end of a failing seed's trace.
    private func logDump() async throws -> [String] {
        var lines: [String] = []
        for peer in peers {
            lines.append("peer \(peer.index)'s log:")
            lines += try await peer.shared.perform { store in
                try store.readLogEntries().map { e in
                    let body = e.object.flatMap { try? store.objects.read($0, packedAt: e.pack, size: e.size) }.map { String(decoding: $0, as: UTF8.self) } ?? (e.deleted ? "deleted" : "-")
                    let merged = e.merged.map { " merged \($0.description.prefix(10))" } ?? ""
                    return "  \(e.seq) \(e.doc) \(e.rev.description.prefix(10)) parent \(e.parent.map { String($0.description.prefix(10)) } ?? "none")\(merged) \(e.origin) \(body.prefix(300))"
                }
            }
        }
        return lines
    }

    private func fingerprint() async throws -> String {
        var text = ""
        for (i, set) in try await revisionSets().enumerated() { text += "\(i): \(set.sorted().joined(separator: ","))\n" }
        for doc in Self.documents { for peer in peers { text += "\(doc)@\(peer.index): \(peer.file(doc).map { BlobDigest.of($0).hex } ?? "-")\n" } }
        return BlobDigest.of(Array(text.utf8)).hex
    }
}
