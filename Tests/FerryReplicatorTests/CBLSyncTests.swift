import Foundation
import Logging
import Testing
import FerryCore
import FerryProtocol
import FerryReplicator
import FerryStore
import FerryTesting

/// Two ferry folders syncing through `CBLChannel` pairs (Couchbase Lite's protocol over
/// BLIP, in memory): every scenario of the channel seam's test, converging as over ferry/1.
@Suite struct CBLSyncTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A folder's aliases as the store will keep them: SHA-1s computed from its objects.
    static func aliases(_ shared: SharedStore) -> InMemoryBlobDigestAliases {
        let layout = shared.layout
        return InMemoryBlobDigestAliases(bytesOf: { try? ObjectStore(layout: layout).read($0) })
    }

    /// One sync both ways, `a` active, over a fresh connection.
    func sync(_ a: SharedStore, _ b: SharedStore, _ aliasesA: InMemoryBlobDigestAliases, _ aliasesB: InMemoryBlobDigestAliases) async throws -> ReplicationStats {
        let (ta, tb) = LoopbackTransport.pair()
        let active = CBLChannel(transport: ta, role: .active, localPeer: a.info.id, database: b.info.name, aliases: aliasesA, remotePeer: b.info.id)
        let passive = CBLChannel(transport: tb, role: .passive, localPeer: b.info.id, database: b.info.name, aliases: aliasesB)
        let client = PeerSession(channel: active, shared: a, logger: logger)
        let server = PeerSession(channel: passive, shared: b, logger: logger)
        async let serving: Void = server.run()
        async let reading: Void = client.run()
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            await active.close(code: 4000, reason: "test timed out")
        }
        var outcome: Result<Void, Error> = .success(())
        do {
            try await client.open()
            try await client.replicate(.both, continuous: false)
        } catch {
            outcome = .failure(error)
        }
        watchdog.cancel()
        let stats = await client.stats
        await client.close()
        _ = await (serving, reading)
        #expect(await server.remotePeer == a.info.id, "the passive side names the peer its checkpoints name")
        try outcome.get()
        return stats
    }

    func same(_ a: String, _ b: String, _ file: String) throws -> Bool {
        let here = try Data(contentsOf: URL(fileURLWithPath: "\(a)/\(file)")), there = try Data(contentsOf: URL(fileURLWithPath: "\(b)/\(file)"))
        if file.hasSuffix(".json") { return try JSONParser.parse(Array(here)) == JSONParser.parse(Array(there)) }
        return here == there
    }

    func verify(_ folder: String) throws {
        let verify = try FerryProcess.ferry(["verify"], in: folder)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
    }

    @Test func twoFoldersSyncBothWaysOverCouchbaseLitesProtocol() async throws {
        let tmp = TemporaryDirectory()
        let laptop = tmp.appending("laptop"), desk = tmp.appending("desk")
        #expect(try FerryProcess.ferry(["init", "--sample", laptop]).status == 0)
        #expect(try FerryProcess.ferry(["init", desk]).status == 0)
        try tmp.write("desk/notes/today.json", #"{"text": "buy apples"}"#)
        try tmp.write("desk/gone.json", #"{"text": "to be deleted"}"#)
        _ = try FerryProcess.shell("head -c 9000000 /dev/urandom > \(desk)/scan.bin")  // more than one blob window
        #expect(try FerryProcess.ferry(["scan"], in: desk).status == 0)
        let a = SharedStore(try FolderStore.open(at: laptop, writable: true))
        let b = SharedStore(try FolderStore.open(at: desk, writable: true))
        let aliasesA = Self.aliases(a), aliasesB = Self.aliases(b)

        let first = try await sync(a, b, aliasesA, aliasesB)
        #expect(first.revisionsSent >= 1 && first.revisionsReceived == 3 && first.blobsReceived == 1, "\(first)")
        for file in ["samplelist.json", "notes/today.json", "scan.bin", "gone.json"] {
            #expect(try same(laptop, desk, file), "\(file)")
        }
        // Every blob both sides hold now has both names.
        #expect(aliasesA.count >= 1 && aliasesB.count >= 1)

        // A deletion on one side, a conflicting edit of samplelist.json on both.
        try FileManager.default.removeItem(atPath: "\(desk)/gone.json")
        _ = try await b.perform { store in try store.ingest(try DocumentID("gone.json")) }
        for (folder, shared, value) in [(laptop, a, 111), (desk, b, 222)] {
            var list = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(folder)/samplelist.json")))).objectValue!
            list["edited"] = .int(value)
            try Data(JSONValue.object(list).prettyBytes).write(to: URL(fileURLWithPath: "\(folder)/samplelist.json"))
            _ = try await shared.perform { store in try store.ingest(try DocumentID("samplelist.json")) }
        }
        _ = try await sync(a, b, aliasesA, aliasesB)
        #expect(!FileManager.default.fileExists(atPath: "\(laptop)/gone.json"))
        #expect(try same(laptop, desk, "samplelist.json"))
        let merged = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: "\(laptop)/samplelist.json"))))
        #expect(merged["edited"]?.intValue == 111 || merged["edited"]?.intValue == 222)
        // Converged: the same revisions on both sides, and a further sync moves nothing.
        let revs = "jq -r '.rev' .ferry/revs.log | sort -u"
        #expect(try FerryProcess.shell(revs, in: laptop).stdout == FerryProcess.shell(revs, in: desk).stdout)
        let again = try await sync(a, b, aliasesA, aliasesB)
        #expect(again.revisionsSent == 0 && again.revisionsReceived == 0, "\(again)")
        for folder in [laptop, desk] { try verify(folder) }
        // The revisions pulled over the channel name the peer as their origin.
        let origins = try FerryProcess.shell("jq -r 'select(.doc == \"scan.bin\") | .origin' \(laptop)/.ferry/revs.log")
        #expect(origins.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == b.info.id, "\(origins.stdout)")
        let pushed = try FerryProcess.shell("jq -r 'select(.doc == \"samplelist.json\" and .origin != \"local\") | .origin' \(desk)/.ferry/revs.log | sort -u")
        #expect(pushed.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").allSatisfy { $0 == a.info.id }, "\(pushed.stdout)")
    }

    /// A session on the active side of Couchbase Lite's protocol for `shared`, over a loopback
    /// connection whose other end the test plays (`BLIPPeer`) as a passive Couchbase Lite "desk".
    func activeSession(_ shared: SharedStore) -> (CBLChannel, PeerSession, BLIPPeer) {
        let (ours, theirs) = LoopbackTransport.pair()
        let channel = CBLChannel(transport: ours, role: .active, localPeer: shared.info.id, database: "desk", aliases: Self.aliases(shared),
                                 remotePeer: "desk")
        return (channel, PeerSession(channel: channel, shared: shared, logger: logger), BLIPPeer(theirs))
    }

    /// A folder served to a Couchbase Lite peer that the test plays (`serve`).
    struct ServedFolder {
        let tmp: TemporaryDirectory
        let folder: String
        let shared: SharedStore
        let channel: CBLChannel
        let peer: BLIPPeer
        let serving: Task<Void, Never>

        /// Closes the connection and waits for the session to end.
        func end() async {
            await channel.close(code: 1000, reason: "done")
            await serving.value
        }
    }

    /// A folder `desk` holding `files` (name → text) as `ferry init` recorded them, served by a
    /// passive session over Couchbase Lite's protocol on a loopback; `peer` is the test's end.
    func serve(_ files: [String: String] = [:], readOnly: Bool = false, limits: CBLLimits = CBLLimits()) throws -> ServedFolder {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("desk")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: folder + "/" + name)) }
        #expect(try FerryProcess.ferry(["init", folder]).status == 0)
        let shared = SharedStore(try FolderStore.open(at: folder, writable: true))
        let (ours, theirs) = LoopbackTransport.pair()
        let channel = CBLChannel(transport: ours, role: .passive, localPeer: shared.info.id, database: "desk", aliases: Self.aliases(shared), limits: limits)
        let session = PeerSession(channel: channel, shared: shared, readOnly: readOnly, logger: logger)
        return ServedFolder(tmp: tmp, folder: folder, shared: shared, channel: channel, peer: BLIPPeer(theirs), serving: Task { await session.run() })
    }

    /// Plays a Couchbase Lite puller on `peer`: subscribes, wants each revision announced (with
    /// no known ancestors) and acknowledges each `rev` or `norev`, until `count` of them came.
    /// Returns the `doc@rev`s announced and the last `rev` or `norev` of each document id.
    func pullEverything(from peer: BLIPPeer, until count: Int) async throws -> (announced: [String], sent: [String: BLIPMessage]) {
        try peer.send(.request(profile: "subChanges"))
        var announced: [String] = []
        var sent: [String: BLIPMessage] = [:]
        while sent.count < count, let message = try await peer.receive() {
            guard message.type == .request else { continue }
            switch message.profile {
            case "changes":
                let rows = try JSONParser.parse(message.body).arrayValue ?? []
                announced += rows.compactMap { row in row.arrayValue.map { "\($0[1].stringValue ?? "?")@\($0[2].stringValue ?? "?")" } }
                if !message.flags.contains(.noReply) {
                    try peer.send(.response(to: message, body: JSONValue.array(rows.map { _ in .array([]) }).canonicalBytes))
                }
            case "rev", "norev":
                sent[message.properties["id"] ?? "?"] = message
                if !message.flags.contains(.noReply) { try peer.send(.response(to: message)) }
            default:
                continue
            }
        }
        return (announced, sent)
    }

    /// Couchbase Lite's passive side says it has caught up (an empty `changes`) right after its
    /// last batch of changes, before that batch is answered, and sends the batch's revisions
    /// after (LiteCore 3.0.1, by hand): a pull from it ends, and saves its checkpoint, only
    /// once they are here.
    /// It used to end at once, "up to date" with nothing received, and its checkpoint skipped
    /// them for good. A revision the channel itself refuses (here a history that skips a
    /// generation) counts as arrived: the pull does not wait for it for ever.
    @Test(arguments: [false, true])
    func aPullFromAPeerThatSaysCaughtUpBeforeSendingItsRevisionsWaitsForThem(thirdRefused: Bool) async throws {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("laptop")
        let shared = SharedStore(try FolderStore.create(at: folder, name: "laptop"))
        let (channel, session, peer) = activeSession(shared)
        let docs = (1...3).map { ("doc\($0)", ($0 == 3 && thirdRefused ? "3-" : "1-") + String(repeating: "\($0)", count: 40)) }
        let reading = Task { await session.run() }
        // The peer: each checkpoint saved, with how many of its revisions were stored by then.
        let playing = Task { () throws -> [String] in
            var saved: [String] = []
            var changesNumber: UInt64 = 0
            var revNumbers: Set<UInt64> = [], revsStored = 0
            while let m = try await peer.receive() {
                if m.type == .response && revNumbers.contains(m.number) {
                    revsStored += 1
                } else if m.type == .response && m.number == changesNumber {
                    try await Task.sleep(for: .milliseconds(300))
                    for (i, (doc, rev)) in docs.enumerated() {
                        var properties: BLIPProperties = ["id": doc, "rev": rev, "sequence": "\(i + 1)"]
                        if rev.hasPrefix("3-") { properties["history"] = "1-" + String(repeating: "a", count: 40) }
                        revNumbers.insert(try peer.send(.request(profile: "rev", properties: properties, body: Array("{\"n\":\(i)}".utf8))))
                    }
                }
                guard m.type == .request else { continue }
                switch m.profile {
                case "getCheckpoint":
                    try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 404, message: "missing")))
                case "setCheckpoint":
                    saved.append("\(revsStored) \(String(decoding: m.body, as: UTF8.self))")
                    try peer.send(.response(to: m, properties: ["rev": "1-cc"]))
                case "subChanges":
                    try peer.send(.response(to: m))
                    let rows = docs.enumerated().map { i, d in "[\(i + 1),\"\(d.0)\",\"\(d.1)\"]" }.joined(separator: ",")
                    changesNumber = try peer.send(.request(profile: "changes", body: Array("[\(rows)]".utf8)))
                    _ = try peer.send(.request(profile: "changes", body: Array("[]".utf8)))
                default:
                    continue
                }
            }
            return saved
        }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            await channel.close(code: 4000, reason: "test timed out")
        }
        try await session.open()
        try await session.replicate(.pull, continuous: false)
        watchdog.cancel()
        let stats = await session.stats
        await session.close()
        await reading.value
        let saved = try await playing.value
        let stored = thirdRefused ? 2 : 3
        #expect(stats.revisionsReceived == stored && stats.revisionsFailed == 3 - stored, "\(stats)")
        for (i, (doc, _)) in docs.enumerated() {
            #expect(FileManager.default.fileExists(atPath: "\(folder)/\(doc).json") == (i < stored), "\(doc)")
        }
        #expect(saved.count == 1 && saved[0].hasPrefix("\(stored) ") && saved[0].contains("\"remote\":3"), "\(saved)")
    }

    /// A continuous pull from a Couchbase Lite, which says "caught up" once per subscription:
    /// what it announces later counts as caught up once it is here and nothing more came for a
    /// moment, so the status goes back to idle and the checkpoint moves on. Both stayed where
    /// the first "caught up" left them while the connection lasted (busy, "8/8").
    @Test func aContinuousPullFromCouchbaseLiteIsCaughtUpAgainAfterLaterChanges() async throws {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("laptop")
        let shared = SharedStore(try FolderStore.create(at: folder, name: "laptop"))
        let (channel, session, peer) = activeSession(shared)
        let reading = Task { await session.run() }
        let rev = { (i: Int) in "1-" + String(repeating: "\(i)", count: 40) }
        let playing = Task { () throws -> [String] in
            var saved: [String] = []
            var announced: [UInt64: Int] = [:], sent: [UInt64: Int] = [:]
            func announce(_ i: Int) throws {
                announced[try peer.send(.request(profile: "changes", body: Array("[[\(i),\"doc\(i)\",\"\(rev(i))\"]]".utf8)))] = i
            }
            while let m = try await peer.receive() {
                if m.type == .response, let i = announced[m.number] {
                    sent[try peer.send(.request(profile: "rev", properties: ["id": "doc\(i)", "rev": rev(i), "sequence": "\(i)"],
                                                body: Array("{\"n\":\(i)}".utf8)))] = i
                } else if m.type == .response, sent[m.number] == 1 {
                    // Later, one more change, and no "caught up" after it (as LiteCore).
                    try await Task.sleep(for: .milliseconds(500))
                    try announce(2)
                }
                guard m.type == .request else { continue }
                switch m.profile {
                case "getCheckpoint":
                    try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 404, message: "missing")))
                case "setCheckpoint":
                    saved.append(String(decoding: m.body, as: UTF8.self))
                    try peer.send(.response(to: m, properties: ["rev": "1-cc"]))
                case "subChanges":
                    try peer.send(.response(to: m))
                    try announce(1)
                    _ = try peer.send(.request(profile: "changes", body: Array("[]".utf8)))
                default:
                    continue
                }
            }
            return saved
        }
        try await session.open()
        let pulling = Task { try await session.replicate(.pull, continuous: true) }
        var idleAfterBoth = false
        for _ in 0..<200 {
            try await Task.sleep(for: .milliseconds(25))
            if FileManager.default.fileExists(atPath: folder + "/doc2.json") { break }
        }
        for _ in 0..<80 {
            try await Task.sleep(for: .milliseconds(25))
            let stats = await session.stats
            idleAfterBoth = stats.pullCaughtUp && stats.revisionsReceived == 2
            if idleAfterBoth { break }
        }
        // Its checkpoint is saved after a quiet second (`DeferredCheckpoint.quiet`).
        try await Task.sleep(for: .milliseconds(1_600))
        await channel.close(code: 1000, reason: "done")
        _ = await pulling.result
        await session.close()
        await reading.value
        let saved = try await playing.value
        #expect(FileManager.default.fileExists(atPath: folder + "/doc2.json"))
        #expect(idleAfterBoth, "the status stayed busy")
        #expect(saved.contains { $0.contains("\"remote\":2") }, "\(saved)")
    }

    /// A pull from a Couchbase Lite whose blob could not be sent at that moment (its
    /// `getAttachment` answered with an error): the revision naming it is not stored, the
    /// checkpoint stays below it and the pull ends in error, so the next pull asks for it again.
    /// The checkpoint used to pass it, and the document never came until edited again there.
    @Test func aRevisionWhoseBlobThePeerCouldNotSendIsPulledAgainByTheNextPull() async throws {
        let tmp = TemporaryDirectory()
        let folder = tmp.appending("laptop")
        let shared = SharedStore(try FolderStore.create(at: folder, name: "laptop"))
        let photo = Array("a photo's bytes".utf8)
        let docs = [("doc1", #"{"n":1}"#), ("img", #"{"photo":{"@type":"blob","digest":"\#(CBLBlobDigest.of(photo))","length":\#(photo.count)}}"#),
                    ("doc3", #"{"n":3}"#)].enumerated().map { i, d in (seq: i + 1, doc: d.0, rev: "1-" + String(repeating: "\(i + 1)", count: 40), body: d.1) }
        var checkpoint: String?  // the peer's copy, kept across the two connections
        var sinces: [String] = []
        for attempt in 1...2 {
            let (channel, session, peer) = activeSession(shared)
            let reading = Task { await session.run() }
            let kept = checkpoint
            let playing = Task { () throws -> (since: String, saved: String?) in
                var since = "", saved: String?, changesNumber: UInt64 = 0
                while let m = try await peer.receive() {
                    if m.type == .response && m.number == changesNumber {
                        for d in docs where d.seq > Int(since) ?? 0 {
                            try peer.send(.request(profile: "rev", properties: ["id": d.doc, "rev": d.rev, "sequence": "\(d.seq)"], body: Array(d.body.utf8)))
                        }
                    }
                    guard m.type == .request else { continue }
                    switch m.profile {
                    case "getCheckpoint":
                        if let saved = saved ?? kept {
                            try peer.send(.response(to: m, properties: ["rev": "1-cc"], body: Array(saved.utf8)))
                        } else {
                            try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 404, message: "missing")))
                        }
                    case "setCheckpoint":
                        saved = String(decoding: m.body, as: UTF8.self)
                        try peer.send(.response(to: m, properties: ["rev": "1-cc"]))
                    case "subChanges":
                        since = m.properties["since"] ?? ""
                        try peer.send(.response(to: m))
                        let rows = docs.filter { $0.seq > Int(since) ?? 0 }.map { "[\($0.seq),\"\($0.doc)\",\"\($0.rev)\"]" }.joined(separator: ",")
                        changesNumber = try peer.send(.request(profile: "changes", body: Array("[\(rows)]".utf8)))
                        _ = try peer.send(.request(profile: "changes", body: Array("[]".utf8)))
                    case "getAttachment" where attempt == 1:
                        try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 500, message: "could not read the blob")))
                    case "getAttachment":
                        try peer.send(.response(to: m, body: photo))
                    default:
                        continue
                    }
                }
                return (since, saved)
            }
            let watchdog = Task {
                try await Task.sleep(for: .seconds(30))
                await channel.close(code: 4000, reason: "test timed out")
            }
            try await session.open()
            var failure: (any Error)?
            do { try await session.replicate(.pull, continuous: false) } catch { failure = error }
            watchdog.cancel()
            await session.close()
            await reading.value
            let (since, saved) = try await playing.value
            sinces.append(since)
            checkpoint = saved ?? checkpoint
            if attempt == 1 {
                let error = try #require(failure, "the first pull did not fail")
                #expect("\(error)".contains("1 revision from the peer could not be stored (img.json: the peer could not send it (502)"), "\(error)")
                #expect(saved?.contains("\"remote\":1") == true, "\(saved ?? "no checkpoint")")
            } else {
                #expect(failure == nil, "\(failure.map { "\($0)" } ?? "")")
                #expect(saved?.contains("\"remote\":3") == true, "\(saved ?? "no checkpoint")")
            }
            #expect(FileManager.default.fileExists(atPath: folder + "/img.json") == (attempt == 2))
        }
        #expect(sinces == ["", "1"], "\(sinces)")
        for d in docs { #expect(FileManager.default.fileExists(atPath: "\(folder)/\(d.doc).json"), "\(d.doc)") }
        #expect(try ObjectStore(layout: shared.layout).read(BlobDigest.of(photo)) == photo)
    }

    /// A revision a Couchbase Lite client proposed while this folder's own edit of the same
    /// document landed: it arrives as a conflict, merged as soon as the client's revisions
    /// are here. Couchbase Lite never says its push is done, so waiting for the end of its
    /// pass left the conflict open for as long as the connection lasted (LiteCore 3.0.1, by
    /// hand), and the client, pulling this folder's edit, dropped its own.
    @Test func aConflictACouchbaseLitePushOpensIsMergedWhileTheConnectionLasts() async throws {
        let served = try serve(["race.json": #"{"v": 0}"#])
        let (folder, shared, peer) = (served.folder, served.shared, served.peer)
        let race = try DocumentID("race.json")
        let base = try #require(await shared.perform { $0.index[race]?.current?.rev })
        let proposal = try peer.send(.request(profile: "proposeChanges",
                                              body: Array(#"[["race","2-\#(String(repeating: "c", count: 40))","\#(base)",20]]"#.utf8)))
        while let reply = try await peer.receive(), reply.number != proposal || reply.type == .request {}
        // This folder's edit lands between the proposal's answer and the revision.
        try Data(#"{"v": 2}"#.utf8).write(to: URL(fileURLWithPath: folder + "/race.json"))
        _ = try await shared.perform { try $0.ingest(race) }
        let rev = try peer.send(.request(profile: "rev", properties: ["id": "race", "rev": "2-" + String(repeating: "c", count: 40),
                                                                        "history": base.description, "sequence": "1"],
                                         body: Array(#"{"v":0,"who":"lc"}"#.utf8)))
        while let reply = try await peer.receive(), reply.number != rev || reply.type == .request {}
        var merged = false
        for _ in 0..<200 {
            merged = await shared.perform { store in
                guard let tree = store.index[race] else { return false }
                return !tree.hasConflict && tree.leafNodes.count == 2 && tree.current?.rev.generation == 3
            }
            if merged { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(merged, "the conflict is still open while the connection lasts")
        let text = try String(contentsOfFile: folder + "/race.json", encoding: .utf8)
        #expect(text.contains("\"who\": \"lc\"") && text.contains("\"v\": 2"), "\(text)")
        await served.end()
    }

    /// Plays a passive Couchbase Lite that refuses conflicts (LiteCore's `noIncomingConflicts`,
    /// as its listener runs): `changes` is answered 409; a proposal is taken only on the
    /// document's current revision, or with no parent when the document is missing or deleted
    /// (304 when it has the revision; a conflict's answer names its current revision when asked,
    /// `conflictIncludesRev`); a `rev` whose history does not reach the document's current
    /// revision is refused, as LiteCore refuses to store it, and any other becomes the current
    /// revision. Nothing to pull. `refusingProposals`: `proposeChanges` is refused whole (409);
    /// `unavailable`: these documents' proposals are answered 500 (a database error). Returns
    /// what it received, in order.
    func playNoConflictsPeer(_ peer: BLIPPeer, current start: [String: String], refusingProposals: Bool = false,
                             unavailable: Set<String> = []) -> Task<[String], Error> {
        Task {
            var current = start, deleted: Set<String> = [], received: [String] = []
            while let m = try await peer.receive() {
                guard m.type == .request else { continue }
                switch m.profile {
                case "getCheckpoint": try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 404, message: "missing")))
                case "subChanges":
                    try peer.send(.response(to: m))
                    try peer.send(.request(profile: "changes", body: Array("[]".utf8)))
                case "changes" where !m.flags.contains(.noReply):
                    try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 409, message: "conflicts are not allowed")))
                case "proposeChanges" where refusingProposals:
                    try peer.send(.error(to: m, BLIPErrorReply(domain: "HTTP", code: 409, message: "no pushes here")))
                case "proposeChanges":
                    var answers: [String] = []
                    for row in try JSONParser.parse(m.body).arrayValue ?? [] {
                        let fields = row.arrayValue?.compactMap(\.stringValue) ?? []
                        let (id, rev, parent) = (fields[0], fields[1], fields[2].isEmpty ? nil : fields[2])
                        let code = unavailable.contains(id) ? "500" : current[id] == rev ? "304"
                            : current[id] == parent || (parent == nil && deleted.contains(id)) ? "0"
                            : m.properties["conflictIncludesRev"] == "true" ? #"{"rev":"\#(current[id] ?? "")","status":409}"# : "409"
                        received.append("propose \(id) \(rev.prefix(2)) on \(parent.map { String($0.prefix(2)) } ?? "-"): \(code.contains("409") ? "409" : code)")
                        answers.append(code)
                    }
                    if !m.flags.contains(.noReply) { try peer.send(.response(to: m, body: Array("[\(answers.joined(separator: ","))]".utf8))) }
                case "rev":
                    let id = m.properties["id"] ?? "", rev = m.properties["rev"] ?? ""
                    let history = (m.properties["history"] ?? "").split(separator: ",").map(String.init)
                    if let mine = current[id], !history.contains(mine) {
                        received.append("rev \(id) \(rev.prefix(2)) refused")
                        try peer.send(.error(to: m, BLIPErrorReply(domain: "LiteCore", code: 8, message: "conflict")))
                        continue
                    }
                    current[id] = rev
                    if m.properties["deleted"] == "1" { deleted.insert(id) } else { deleted.remove(id) }
                    received.append("rev \(id) \(rev.prefix(2))\(m.properties["deleted"] == "1" ? " deleted" : "")")
                    try peer.send(.response(to: m))
                default: if !m.flags.contains(.noReply) { try peer.send(.response(to: m)) }
                }
            }
            return received
        }
    }

    /// Pushes to `shared` to a passive Couchbase Lite that refuses conflicts
    /// (`playNoConflictsPeer`); what it received, the thrown error and the stats.
    func pushToNoConflictsPeer(_ shared: SharedStore, current: [String: String], refusingProposals: Bool = false,
                               unavailable: Set<String> = []) async throws
        -> (received: [String], thrown: ReplicationError?, stats: ReplicationStats) {
        let (channel, session, peer) = activeSession(shared)
        let reading = Task { await session.run() }
        let playing = playNoConflictsPeer(peer, current: current, refusingProposals: refusingProposals, unavailable: unavailable)
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            await channel.close(code: 4000, reason: "test timed out")
        }
        var thrown: ReplicationError?
        do { try await session.replicate(.both, continuous: false) } catch let error as ReplicationError { thrown = error }
        watchdog.cancel()
        let stats = await session.stats
        await session.close()
        await reading.value
        return (try await playing.value, thrown, stats)
    }

    /// A passive Couchbase Lite that refuses conflicts (a Couchbase Lite listener) answers a
    /// push's `changes` with 409: the push goes on as proposals, as LiteCore's own pusher does.
    /// A new document goes with no parent; one several edits ahead of the peer is proposed again
    /// on the revision the peer names; a merge on the peer's branch goes; a revision that does
    /// not descend from the peer's (a merge that stayed on this folder's branch, a revision the
    /// peer has that is not here) is that document's failure, never sent: the peer would refuse
    /// to store it (LiteCore 3.0.1, by hand). The push used to stop at the first 409 for good.
    @Test func aPeerThatRefusesConflictsIsPushedToWithProposals() async throws {
        let tmp = TemporaryDirectory()
        let laptop = tmp.appending("laptop"), desk = tmp.appending("desk")
        for folder in [laptop, desk] { #expect(try FerryProcess.ferry(["init", folder]).status == 0) }
        let a = SharedStore(try FolderStore.open(at: laptop, writable: true))
        let b = SharedStore(try FolderStore.open(at: desk, writable: true))
        func save(_ shared: SharedStore, _ folder: String, _ name: String, _ text: String) async throws -> RevisionID {
            try Data(text.utf8).write(to: URL(fileURLWithPath: "\(folder)/\(name)"))
            let doc = try DocumentID(name)
            _ = try await shared.perform { try $0.ingest(doc) }
            return try #require(await shared.perform { $0.index[doc]?.current?.rev })
        }
        // Two documents edited on both sides after a sync; the desk's edit is what the peer
        // has. m.json: two edits here, so the merge stays on this branch (the higher generation
        // wins). mw.json: two edits on the desk, so the merge is made on the desk's revision.
        _ = try await save(a, laptop, "m.json", #"{"a": 0, "b": 0}"#)
        _ = try await save(a, laptop, "mw.json", #"{"a": 0, "b": 0}"#)
        _ = try await sync(a, b, Self.aliases(a), Self.aliases(b))
        let theirs = try await save(b, desk, "m.json", #"{"a": 0, "b": 2}"#)
        _ = try await save(a, laptop, "m.json", #"{"a": 1, "b": 0}"#)
        _ = try await save(a, laptop, "m.json", #"{"a": 2, "b": 0}"#)
        _ = try await save(b, desk, "mw.json", #"{"a": 0, "b": 1}"#)
        let theirsWin = try await save(b, desk, "mw.json", #"{"a": 0, "b": 2}"#)
        _ = try await save(a, laptop, "mw.json", #"{"a": 1, "b": 0}"#)
        _ = try await sync(a, b, Self.aliases(a), Self.aliases(b))
        let merges = try await a.perform { store in try ["m.json", "mw.json"].map { store.index[try DocumentID($0)]?.current } }
        #expect(merges[0]?.rev.generation == 4 && merges[0]?.parent != theirs && merges[1]?.parent == theirsWin, "\(merges)")
        // deep.json: three generations here, the first one there.
        let first = try await save(a, laptop, "deep.json", #"{"v": 1}"#)
        _ = try await save(a, laptop, "deep.json", #"{"v": 2}"#)
        _ = try await save(a, laptop, "deep.json", #"{"v": 3}"#)
        // x.json: the peer has a revision this folder never saw. multi.json: two revisions
        // here, none there (LiteCore names "" as its revision).
        _ = try await save(a, laptop, "x.json", #"{"v": 1}"#)
        _ = try await save(a, laptop, "note.json", #"{"v": 1}"#)
        _ = try await save(a, laptop, "multi.json", #"{"v": 1}"#)
        _ = try await save(a, laptop, "multi.json", #"{"v": 2}"#)
        let (received, thrown, stats) = try await pushToNoConflictsPeer(a, current: [
            "m": theirs.description, "mw": theirsWin.description, "deep": first.description, "x": "2-" + String(repeating: "f", count: 40),
        ])
        #expect(thrown == nil, "\(String(describing: thrown))")
        for line in ["propose note 1- on -: 0", "rev note 1-",
                     "propose deep 3- on 2-: 409", "propose deep 3- on 1-: 0", "rev deep 3-",
                     "propose mw 4- on 3-: 0", "rev mw 4-",
                     "propose multi 2- on 1-: 409", "propose multi 2- on -: 0", "rev multi 2-",
                     "propose m 4- on 3-: 409", "propose x 1- on -: 409"] {
            #expect(received.contains(line), "\(line) in \(received)")
        }
        #expect(!received.contains { $0.hasPrefix("rev x") || $0.hasPrefix("rev m ") || $0.hasSuffix("refused") }, "\(received)")
        #expect(stats.revisionsSent == 4 && stats.revisionsFailed == 2, "\(stats)")

        // A proposal the peer could not look at (500) fails the pass, to be proposed again.
        let unavailable = try await pushToNoConflictsPeer(a, current: [:], unavailable: ["note"])
        #expect(unavailable.thrown?.failureKind == .transient && unavailable.thrown?.message.contains("note.json (5xx)") == true,
                "\(String(describing: unavailable.thrown))")

        // A peer that refuses proposals too: the push stops for good, the pull still runs.
        let refused = try await pushToNoConflictsPeer(a, current: [:], refusingProposals: true)
        #expect(refused.thrown?.failureKind == .permanent && refused.thrown?.refusesPush == true, "\(String(describing: refused.thrown))")
        #expect(refused.thrown?.message.hasPrefix("the peer refused the push (409): no pushes here") == true, "\(String(describing: refused.thrown))")
        #expect(refused.stats.pullCaughtUp)
    }

    /// A Couchbase Lite peer that sends what no folder may hold: each refused with an ERR, and
    /// nothing written; what a path cannot hold is escaped inside the folder, never outside.
    @Test func hostileRevisionsAreRefusedWithoutWritingAnything() async throws {
        var limits = CBLLimits()
        limits.maxBodyBytes = 1 << 16
        let served = try serve(limits: limits)
        let (tmp, folder, peer) = (served.tmp, served.folder, served.peer)
        func rev(_ id: String, _ rev: String, history: String? = nil, _ body: String) throws -> UInt64 {
            var properties: BLIPProperties = ["id": id, "rev": rev, "sequence": "1"]
            if let history { properties["history"] = history }
            return try peer.send(.request(profile: "rev", properties: properties, body: Array(body.utf8)))
        }
        let good = "1-52c4e4f222e3484064ad05da9d859ae2d29b88fd"
        var refused: [UInt64: String] = [:]
        refused[try rev(String(repeating: "x", count: 300), good, "{}")] = "long segment"
        refused[try rev("big", good, #"{"pad":""# + String(repeating: "x", count: 70_000) + #""}"#)] = "oversized body"
        refused[try rev("liar", "5-aa", history: "1-bb", "{}")] = "history that skips generations"
        refused[try rev("file::../x.json", good, #"{"file":{"@type":"blob","digest":"sha1-WwBmnEgNXP+9+ovbqZVhFg8tG3c=","length":1024},"extra":1}"#)] = "file body with more than its blob"
        let traversal = try rev("../../outside", good, #"{"v":1}"#)
        let ferryDir = try rev(".ferry/config", good, #"{"v":2}"#)
        var answers: [UInt64: BLIPMessage] = [:]
        while answers.count < refused.count + 2, let reply = try await peer.receive() {
            if reply.type == .request {
                // The file document's blob: the channel asks for it to learn its SHA-256.
                try peer.send(.response(to: reply, body: (0..<1024).map { UInt8($0 % 256) }))
                continue
            }
            answers[reply.number] = reply
        }
        await served.end()
        for (number, why) in refused {
            #expect(answers[number]?.errorReply?.code == 400, "\(why): \(String(describing: answers[number]))")
        }
        #expect(answers[traversal]?.type == .response && answers[ferryDir]?.type == .response)
        // Escaped, inside the folder: nothing outside it, nothing in .ferry/.
        #expect(!FileManager.default.fileExists(atPath: tmp.appending("outside.json")))
        #expect(FileManager.default.fileExists(atPath: "\(folder)/%2E%2E/%2E%2E/outside.json"))
        #expect(FileManager.default.fileExists(atPath: "\(folder)/%2Eferry/config.json"))
        #expect(!FileManager.default.fileExists(atPath: "\(folder)/.ferry/config.json"))
        let listed = try FerryProcess.shell("jq -r .doc .ferry/revs.log | sort -u", in: folder).stdout
        #expect(listed == "%2E%2E/%2E%2E/outside.json\n%2Eferry/config.json\n", "\(listed)")
        try verify(folder)
    }

    /// A read-only listener refuses each revision a Couchbase Lite client proposes (403 per
    /// entry it does not have, which Couchbase Lite counts against that document and goes on;
    /// 304 for one it has), not the whole
    /// message (which stops its replicator, pull included); it keeps the client's checkpoint
    /// without its push part, and still serves the pull.
    @Test func aReadOnlyListenerRefusesEachProposalAndStillServesThePull() async throws {
        let served = try serve(["a.json": #"{"v": 1}"#], readOnly: true)
        let (folder, shared, peer) = (served.folder, served.shared, served.peer)
        let rev = "1-52c4e4f222e3484064ad05da9d859ae2d29b88fd"
        let a = try DocumentID("a.json")
        let own = try #require(await shared.perform { $0.index[a]?.current?.rev })
        // The empty id has no ferry path: the channel answers it (403) by its position.
        let proposal = try peer.send(.request(profile: "proposeChanges", body: Array(#"[["b","\#(rev)","",9],["a","\#(own)","",9],["","\#(rev)","",9],["c","\#(rev)","",9]]"#.utf8)))
        let client = "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc="
        let save = try peer.send(.request(profile: "setCheckpoint", properties: ["client": client, "rev": ""], body: Array(#"{"local":2,"remote":1}"#.utf8)))
        let subscription = try peer.send(.request(profile: "subChanges"))
        var answers: [UInt64: BLIPMessage] = [:]
        var announced: [String] = []
        while announced.isEmpty || answers.count < 3, let message = try await peer.receive() {
            guard message.type == .request else {
                answers[message.number] = message
                continue
            }
            if message.profile == "changes", let rows = try JSONParser.parse(message.body).arrayValue {
                announced += rows.compactMap { $0.arrayValue?[1].stringValue }
            }
            // None wanted: the announcement is what this test looks at.
            if !message.flags.contains(.noReply) { try peer.send(.response(to: message, body: Array("[]".utf8))) }
        }
        await served.end()
        #expect(answers[proposal]?.type == .response && answers[proposal]?.body == Array("[403,304,403,403]".utf8), "\(String(describing: answers[proposal]))")
        #expect(answers[save]?.type == .response && answers[subscription]?.type == .response)
        let kept = CheckpointStore(layout: shared.layout).get(client)
        #expect(kept?.local == 0 && kept?.remote == 1, "\(String(describing: kept))")
        #expect(announced == ["a"], "\(announced)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/b.json") && !FileManager.default.fileExists(atPath: folder + "/c.json"))
    }

    /// A document with a top-level property whose name begins with `_` is announced but goes
    /// out as `norev` (422): Couchbase Lite would drop that property. The others go as `rev`s.
    @Test func aDocumentCouchbaseLiteWouldChangeGoesAsNorev() async throws {
        let served = try serve([
            "hidden.json": #"{"_private": 1, "ok": true}"#,
            "plain.json": #"{"meta": {"_x": 1}}"#,
            // A NUL in the name: the reason must still go out (a BLIP property cannot hold a NUL).
            "nul.json": #"{"_\u0000": 1}"#,
        ])
        let (_, sent) = try await pullEverything(from: served.peer, until: 3)
        await served.end()
        #expect(sent["plain"]?.profile == "rev" && sent["plain"]?.body == Array(#"{"meta":{"_x":1}}"#.utf8), "\(String(describing: sent["plain"]))")
        #expect(sent["hidden"]?.profile == "norev" && sent["hidden"]?.properties["error"] == "422", "\(String(describing: sent["hidden"]))")
        #expect(sent["hidden"]?.properties["reason"]?.contains("\"_private\" begins with _") == true)
        #expect(sent["nul"]?.profile == "norev" && sent["nul"]?.properties["reason"]?.contains(#""_\u0000" begins with _"#) == true,
                "\(String(describing: sent["nul"]))")
    }

    /// Couchbase Lite is announced each document at its current revision only, as Sync
    /// Gateway does: a document edited twice since it was created goes once, with the two
    /// before it as history; a deleted one at its deletion; a merged conflict at its merge,
    /// not also at the deletion that closed the losing branch. A Couchbase Lite app that holds
    /// an edit of its own would otherwise see a conflict for each revision in between, and
    /// LiteCore takes the last revision it pulls as the server's: sent after the merge, that
    /// deletion left the document deleted there (LiteCore 3.0.1, by hand).
    /// A client whose checkpoints name a ferry folder (`pull:<id>`) is a ferry replicator over
    /// Couchbase Lite's protocol, and is announced every revision, as over ferry/1.
    @Test(arguments: [nil, "cp-yiVHODsYy2NW7LUHbpSbDgvk3bc=", "pull:laptop-7f3a"])
    func couchbaseLiteIsAnnouncedEachDocumentAtItsCurrentRevisionOnly(checkpointClient: String?) async throws {
        let served = try serve(["list.json": #"{"v": 1}"#, "gone.json": #"{"v": 1}"#, "once.json": #"{"v": 1}"#, "both.json": #"{"v": 1}"#])
        let (folder, shared, peer) = (served.folder, served.shared, served.peer)
        let list = try DocumentID("list.json"), gone = try DocumentID("gone.json"), both = try DocumentID("both.json")
        for v in [2, 3] {
            try Data(#"{"v": \#(v)}"#.utf8).write(to: URL(fileURLWithPath: folder + "/list.json"))
            _ = try await shared.perform { try $0.ingest(list) }
        }
        try FileManager.default.removeItem(atPath: folder + "/gone.json")
        _ = try await shared.perform { try $0.ingest(gone) }
        // both.json: an edit here and a peer's edit of the same revision, merged at once, the
        // losing branch closed by a deletion.
        try Data(#"{"v": 1, "x": 1}"#.utf8).write(to: URL(fileURLWithPath: folder + "/both.json"))
        let merged = try await shared.perform { store -> [LogEntry] in
            let base = try #require(store.index[both]?.current?.rev)
            _ = try store.ingest(both)
            let body: JSONValue = ["v": 1, "y": 1]
            let bytes = body.canonicalBytes
            let object = try store.objects.writeBody(bytes)
            return try store.applyRemote(IncomingRevision(doc: both, rev: RevisionID.compute(parent: base, deleted: false, body: object),
                                                          history: [base], deleted: false, object: object, size: bytes.count, origin: "peer"))
        }
        #expect(merged.count == 3 && merged[1].merged != nil && merged[2].deleted, "\(merged)")
        let (history, current) = try #require(await shared.perform { store in
            store.index[list].flatMap { tree in tree.current.map { (tree.history(of: $0.rev), $0.rev) } }
        })
        #expect(history.count == 3)
        if let checkpointClient { try peer.send(.request(profile: "getCheckpoint", properties: ["client": checkpointClient])) }
        let (announced, sent) = try await pullEverything(from: peer, until: 4)
        await served.end()
        let (currents, everyRevision) = try await shared.perform { store in
            try ["both.json", "gone.json", "list.json", "once.json"].reduce(into: ([String](), [String]())) { lists, name in
                let tree = try #require(store.index[try DocumentID(name)])
                lists.0.append("\(name.dropLast(5))@\(try #require(tree.current?.rev))")
                var revs: [String] = []
                tree.forEachNode { node in if node.seq != 0 { revs.append("\(name.dropLast(5))@\(node.rev)") } }
                lists.1 += revs
            }
        }
        guard checkpointClient?.hasPrefix("pull:") != true else {
            #expect(announced.count == 11 && Set(announced) == Set(everyRevision), "\(announced)")
            return
        }
        #expect(announced.sorted() == currents, "\(announced)")
        #expect(sent["both"]?.properties["rev"] == merged[1].rev.description && sent["both"]?.properties["deleted"] == nil,
                "\(String(describing: sent["both"]?.properties))")
        #expect(sent["list"]?.properties["rev"] == current.description)
        #expect(sent["list"]?.properties["history"] == history.dropFirst().map(\.description).joined(separator: ","),
                "\(String(describing: sent["list"]?.properties))")
        #expect(sent["list"]?.body == Array(#"{"v":3}"#.utf8))
    }
}
