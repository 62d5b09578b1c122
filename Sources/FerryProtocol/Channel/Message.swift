import FerryCore

/// The protocol versions this build speaks (`ferry/1`, subprotocol `ferry-1` on the WebSocket).
public enum ProtocolVersion {
    /// The WebSocket subprotocol name: an HTTP token, as RFC 6455 §4.1 requires (`/` is a
    /// separator: strict clients such as python3-websockets refuse `ferry/1`).
    public static let subprotocol = "ferry-1"
    /// Versions offered in `hello`, best first.
    public static let supported = [1]
}

/// One entry of a `changes` message: a revision the sender has since the receiver's checkpoint.
public struct ChangeEntry: Sendable, Equatable {
    /// The sender's local sequence of the revision.
    public var sequence: Int
    /// The document.
    public var doc: DocumentID
    /// The revision (a leaf of the sender's tree).
    public var rev: RevisionID
    /// True for a deletion.
    public var deleted: Bool
    /// Estimated body size in bytes.
    public var bodySize: Int

    /// An entry.
    public init(sequence: Int, doc: DocumentID, rev: RevisionID, deleted: Bool, bodySize: Int) {
        self.sequence = sequence
        self.doc = doc
        self.rev = rev
        self.deleted = deleted
        self.bodySize = bodySize
    }
}

/// The receiver's answer to one `changes` entry.
public enum ChangeAnswer: Sendable, Equatable {
    /// Not wanted (already known, or filtered out).
    case notWanted
    /// Wanted; these ancestors of it are already known here (the sender may stop its
    /// history at the first of them).
    case wanted(knownAncestors: [RevisionID])
}

/// One entry of a `proposeChanges` message (a push without a prior `subChanges`).
public struct ProposedChange: Sendable, Equatable {
    /// The document.
    public var doc: DocumentID
    /// The revision proposed.
    public var rev: RevisionID
    /// The revision the sender believes the receiver has as current (nil: none).
    public var parent: RevisionID?
    /// Estimated body size.
    public var bodySize: Int

    /// An entry.
    public init(doc: DocumentID, rev: RevisionID, parent: RevisionID?, bodySize: Int) {
        self.doc = doc
        self.rev = rev
        self.parent = parent
        self.bodySize = bodySize
    }
}

/// The answer to one `proposeChanges` entry, with Couchbase Lite's status numbers.
public enum ProposeAnswer: Int, Sendable, Equatable {
    /// Send it.
    case send = 0
    /// Already here.
    case alreadyHave = 304
    /// Refused: this side takes no pushes (a read-only listener). Couchbase Lite counts it as
    /// that document's failure and goes on, where an error answering the whole message stops
    /// its replicator, pull included.
    case forbidden = 403
    /// It would conflict; the sender should pull first.
    case conflict = 409
    /// The receiver could not look (any 5xx, such as a database error): ask again later.
    case unavailable = 503
}

/// A JSON document's body as canonical bytes: a store's own, which its serializer made
/// (`checked` nil), or a peer's, checked to be canonical as they were decoded
/// (`CanonicalJSONCheck`), with what the check found.
public struct CanonicalBody: Sendable {
    /// The canonical text of a JSON object.
    public let bytes: [UInt8]
    /// What `CanonicalJSONCheck` found in them, if they were checked.
    public let checked: CanonicalJSONFacts?

    /// A body of a store's own canonical bytes, not checked.
    public init(_ bytes: [UInt8]) {
        self.init(bytes, checked: nil)
    }

    /// A body of canonical bytes with what their check found (within the package only: the
    /// facts must be those of these bytes).
    package init(_ bytes: [UInt8], checked: CanonicalJSONFacts?) {
        self.bytes = bytes
        self.checked = checked
    }
}

/// A revision's body as carried by `rev`. Two bodies are equal when they are the same
/// revision body: a JSON value equals canonical bytes that are its canonical text.
public enum RevisionBody: Sendable, Equatable {
    /// A deletion: no body.
    case deleted
    /// A JSON document's body (an object; the receiver stores its canonical form).
    case json(JSONValue)
    /// A file document's body: a blob the receiver fetches with `getAttachment` if missing.
    case blob(BlobReference)
    /// A JSON document's body as canonical bytes, as a store holds them: sent as they are
    /// (the frame's `body`, like `.json`), and decoded as they are where they check as
    /// canonical. Parsing a stored body only to write it out again cost the sender more than
    /// the rest of the frame, and the receiver most of a large body's time.
    case canonicalJSON(CanonicalBody)
    /// A JSON document's body as a delta (`JSONDelta`) against `base`, a revision the
    /// receiver said it has; only when both sides agreed on the `delta` feature.
    case delta(base: RevisionID, delta: JSONValue)

    /// The same body, however each is held.
    public static func == (a: RevisionBody, b: RevisionBody) -> Bool {
        switch (a, b) {
        case (.deleted, .deleted): return true
        case let (.json(x), .json(y)): return x == y
        case let (.blob(x), .blob(y)): return x == y
        case let (.canonicalJSON(x), .canonicalJSON(y)): return x.bytes == y.bytes
        case let (.json(x), .canonicalJSON(y)), let (.canonicalJSON(y), .json(x)): return x.canonicalBytes == y.bytes
        case let (.delta(x, d), .delta(y, e)): return x == y && d == e
        default: return false
        }
    }
}

/// Optional features negotiated in `hello`.
public enum ProtocolFeature {
    /// Delta sync: `rev` may carry a JSON body as a delta against a revision the receiver has.
    public static let delta = "delta"
}

/// A request: something one peer asks of the other. Named and shaped after Couchbase Lite's
/// replication protocol (see docs/protocol.md for the wire form of each).
public enum Request: Sendable, Equatable {
    /// Opens the conversation: versions offered, the sender's peer id, the database it
    /// expects, optional features (`"delta"`).
    case hello(versions: [Int], peer: String, database: String, features: [String])
    /// Asks for the checkpoint stored under `client`.
    case getCheckpoint(client: String)
    /// Stores a checkpoint; `rev` is the one previously returned (nil for the first).
    case setCheckpoint(client: String, rev: String?, checkpoint: Checkpoint)
    /// Asks the peer to send `changes` since `since` (its own sequence), once or continuously,
    /// optionally only for some documents.
    case subChanges(since: Int, continuous: Bool, docIDs: [DocumentID]?)
    /// Announces revisions; an empty list means "caught up".
    case changes([ChangeEntry])
    /// Proposes revisions to push.
    case proposeChanges([ProposedChange])
    /// Sends one revision with its history (parent first); a merge also names the leaf it
    /// merged (its second parent).
    /// `author` names who made it (`NAME@HOST`), when the sender knows.
    case rev(doc: DocumentID, rev: RevisionID, history: [RevisionID], sequence: Int, body: RevisionBody, merged: RevisionID? = nil,
             author: String? = nil)
    /// Says a requested revision cannot be sent (always sent with `noreply`).
    case norev(doc: DocumentID, rev: RevisionID, sequence: Int, status: Int, reason: String)
    /// Asks for a blob's bytes from `offset`, at most `length` of them (nil: to the end),
    /// which come back as binary frames. A receiver asks large blobs a window at a time, so
    /// the bytes in flight, and its memory, stay bounded whatever the blob's size.
    case getAttachment(digest: BlobDigest, offset: Int = 0, length: Int? = nil)

    /// The message's type name on the wire.
    public var typeName: String {
        switch self {
        case .hello: "hello"
        case .getCheckpoint: "getCheckpoint"
        case .setCheckpoint: "setCheckpoint"
        case .subChanges: "subChanges"
        case .changes: "changes"
        case .proposeChanges: "proposeChanges"
        case .rev: "rev"
        case .norev: "norev"
        case .getAttachment: "getAttachment"
        }
    }
}

/// A replication checkpoint: how far each side has got with the other.
public struct Checkpoint: Sendable, Equatable {
    /// The highest local sequence the peer has acknowledged (push progress).
    public var local: Int
    /// The highest sequence of the peer's that has been applied here (pull progress).
    public var remote: Int

    /// A checkpoint.
    public init(local: Int, remote: Int) {
        self.local = local
        self.remote = remote
    }
}

/// A response's payload, by what it answers.
public enum Response: Sendable, Equatable {
    /// Success with nothing to say (`rev`, and `subChanges` from a peer that announces no count).
    case ok
    /// `subChanges` accepted, with how many changes the first pass will announce (the progress
    /// total); a peer that does not say answers `.ok`.
    case subscribed(count: Int)
    /// `hello`: the version chosen, the responder's peer id and the features both support.
    case hello(version: Int, peer: String, features: [String])
    /// `getCheckpoint`: the stored checkpoint and its revision.
    case checkpoint(rev: String, checkpoint: Checkpoint)
    /// `setCheckpoint`: the checkpoint's new revision.
    case checkpointSaved(rev: String)
    /// `changes`: one answer per entry.
    case changes([ChangeAnswer], maxHistory: Int?)
    /// `proposeChanges`: one answer per entry, and for an entry answered 409 the peer's own
    /// current revision of that document when it said (by entry; Couchbase Lite 3 says when
    /// asked, `conflictIncludesRev`).
    case proposeChanges([ProposeAnswer], peerRevisions: [Int: RevisionID] = [:])
    /// `getAttachment`: how many bytes follow as binary frames (the asked range, clipped to
    /// the blob's end).
    case attachment(length: Int)
    /// A failure with an HTTP-like status and a sentence.
    case error(status: Int, message: String)
}
