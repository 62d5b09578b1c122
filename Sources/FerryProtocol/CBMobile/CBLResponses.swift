import FerryCore

/// Which of ferry's requests a reply from the peer answers, so it can be decoded.
enum CBLAnswerKind: Sendable {
    case getCheckpoint, setCheckpoint, subChanges, rev, other
    case changes(count: Int)
    case proposeChanges(count: Int)

    init(_ request: Request) {
        switch request {
        case .getCheckpoint: self = .getCheckpoint
        case .setCheckpoint: self = .setCheckpoint
        case .subChanges: self = .subChanges
        case .rev: self = .rev
        case .changes(let e): self = .changes(count: e.count)
        case .proposeChanges(let e): self = .proposeChanges(count: e.count)
        default: self = .other
        }
    }
}

/// Replies both ways: ferry's `Response` as Couchbase Lite's RES/ERR, and back.
enum CBLResponses {
    /// The `maxHistory` answered when the session names none: as long a history as one
    /// message's properties can hold (`CBLRequestEncoding.historyIDsPerMessage`).
    static let defaultMaxHistory = CBLRequestEncoding.historyIDsPerMessage

    /// An ERR for a ferry error: domain HTTP, as Couchbase Lite's replicator answers.
    static func error(status: Int, message: String) -> BLIPErrorReply {
        BLIPErrorReply(domain: "HTTP", code: Int32(clamping: status), message: String(message.prefix(500)))
    }

    /// ferry's error for an ERR: HTTP and BLIP codes are HTTP statuses; another domain's code
    /// (LiteCore's, POSIX's) means nothing here, so it reads as 500 with the domain named.
    static func response(for reply: BLIPErrorReply) -> Response {
        let text = reply.message.isEmpty ? "\(reply.domain) error \(reply.code)" : reply.message
        if reply.domain == "HTTP" || reply.domain == "BLIP" { return .error(status: Int(reply.code), message: text) }
        return .error(status: 500, message: "\(reply.domain) error \(reply.code): \(text)")
    }

    /// The reply to a peer's request: properties and body (`nil`: an ERR instead).
    /// `kept`/`total` put a `changes` or `proposeChanges` answer back in the message's
    /// positions; entries the channel left out are "not wanted" (changes) or 403 (proposals).
    static func encode(_ response: Response, kept: [Int]?, total: Int) -> Result<(BLIPProperties, [UInt8]), BLIPErrorReply> {
        switch response {
        case .ok, .subscribed:
            // Couchbase Lite's subChanges reply has no count: an empty success.
            return .success(([:], []))
        case .error(let status, let message):
            return .failure(error(status: status, message: message))
        case let .checkpoint(rev, checkpoint):
            let body: JSONValue = .object(["local": .int(checkpoint.local), "remote": .int(checkpoint.remote)])
            return .success((["rev": rev], body.canonicalBytes))
        case .checkpointSaved(let rev):
            return .success((["rev": rev], []))
        case let .changes(answers, maxHistory):
            var rows = [JSONValue](repeating: .int(0), count: kept == nil ? answers.count : total)
            for (i, answer) in answers.enumerated() {
                let position = kept.map { i < $0.count ? $0[i] : -1 } ?? i
                guard position >= 0, position < rows.count else { continue }
                if case .wanted(let known) = answer { rows[position] = .array(known.map { .string($0.description) }) }
            }
            let properties: BLIPProperties = ["maxHistory": String(maxHistory ?? defaultMaxHistory), "blobs": "true"]
            return .success((properties, JSONValue.array(rows).canonicalBytes))
        case .proposeChanges(let answers, _):
            var codes = [Int](repeating: 403, count: kept == nil ? answers.count : total)
            for (i, answer) in answers.enumerated() {
                let position = kept.map { i < $0.count ? $0[i] : -1 } ?? i
                if position >= 0, position < codes.count { codes[position] = answer.rawValue }
            }
            // Trailing zeros may be left off; all zeros is `[]`, "send them all".
            while codes.last == 0 { codes.removeLast() }
            // Without it LiteCore sends at most 20 revisions of history, ending with the one
            // this side has, and leaves out those between: a revision further past what ferry
            // has came with a history that skipped generations, and was refused
            // (docs/interop.md). With it, the history is whole up to that length (generations
            // its tree pruned are filled in with made-up ids).
            return .success((["maxHistory": String(defaultMaxHistory)], JSONValue.array(codes.map { .int($0) }).canonicalBytes))
        case .hello, .attachment:
            return .failure(error(status: 500, message: "no BLIP form for this answer"))
        }
    }

    /// ferry's answer for the peer's reply to a request of `kind`. A reply ferry cannot read
    /// becomes an error answer (502), never a crash.
    static func decode(_ reply: BLIPMessage, kind: CBLAnswerKind) -> Response {
        if let error = reply.errorReply { return response(for: error) }
        let p = reply.properties
        func body() -> JSONValue? { reply.body.isEmpty ? nil : try? JSONParser.parse(reply.body) }
        switch kind {
        case .getCheckpoint:
            guard let value = body(), let members = value.objectValue else { return .error(status: 502, message: "the peer's checkpoint is not a JSON object") }
            let checkpoint = Checkpoint(local: max(0, members["local"]?.intValue ?? 0), remote: max(0, members["remote"]?.intValue ?? 0))
            return .checkpoint(rev: p["rev"] ?? "", checkpoint: checkpoint)
        case .setCheckpoint:
            return .checkpointSaved(rev: p["rev"] ?? "")
        case .subChanges, .rev, .other:
            return .ok
        case .changes(let count):
            let rows = reply.body.isEmpty ? [] : (body()?.arrayValue ?? [])
            var answers: [ChangeAnswer] = []
            for row in rows.prefix(count) {
                if let known = row.arrayValue {
                    answers.append(.wanted(knownAncestors: known.compactMap { $0.stringValue.flatMap { try? RevisionID($0) } }))
                } else {
                    answers.append(.notWanted)
                }
            }
            return .changes(answers, maxHistory: p["maxHistory"].flatMap { Int($0) })
        case .proposeChanges(let count):
            let rows = reply.body.isEmpty ? [] : (body()?.arrayValue ?? [])
            var answers = [ProposeAnswer](repeating: .send, count: count)
            var peerRevisions: [Int: RevisionID] = [:]
            for (i, row) in rows.prefix(count).enumerated() {
                // Asked with `conflictIncludesRev`, LiteCore 3 answers a conflict as
                // {"status": 409, "rev": its current revision} (some peers as [409, "rev"]).
                let code = row.intValue ?? row.arrayValue?.first?.intValue ?? row.objectValue?["status"]?.intValue ?? 409
                answers[i] = code == 0 ? .send : code == 304 ? .alreadyHave : code == 403 ? .forbidden : code >= 500 ? .unavailable : .conflict
                let theirs = row.objectValue?["rev"]?.stringValue ?? row.arrayValue?.dropFirst().first?.stringValue
                if answers[i] == .conflict, let theirs, let rev = try? RevisionID(theirs) { peerRevisions[i] = rev }
            }
            return .proposeChanges(answers, peerRevisions: peerRevisions)
        }
    }
}
