import FerryCore

/// A place an edit writes to, in the shape of the simulated documents:
/// `{"f0": …, "f3": …, "list": ["e12", …], "rows": [{"id": "r0", "v": …}, …]}` for JSON
/// documents, and a text for file documents.
enum Place: Hashable, Sendable, CustomStringConvertible {
    /// Whether the document exists (live) or not (deleted).
    case exists
    /// A top-level member.
    case field(String)
    /// Whether a unique string is in `list`.
    case item(String)
    /// `v` of the row with this id in `rows`.
    case row(String)
    /// A file document's text.
    case content

    var description: String {
        switch self {
        case .exists: "exists"
        case .field(let k): k
        case .item(let x): "list∋\(x)"
        case .row(let r): "rows[\(r)].v"
        case .content: "content"
        }
    }
}

/// What an edit wrote at a place.
enum PlaceValue: Hashable, Sendable, CustomStringConvertible {
    /// A value (a unique tag).
    case text(String)
    /// Present (an item in the list, a live document).
    case present
    /// Absent (a removed member or item, a deleted document).
    case absent

    var description: String {
        switch self {
        case .text(let t): t
        case .present: "present"
        case .absent: "absent"
        }
    }
}

/// One value written by an edit.
struct Write: Sendable, CustomStringConvertible {
    let place: Place
    let value: PlaceValue
    var description: String { "\(place)=\(value)" }
}

/// One edit a simulated user made: where, what it wrote, and what it had seen.
struct Edit: Sendable {
    /// Its number (its values are tagged `e<id>`).
    let id: Int
    /// The peer it was made on.
    let peer: Int
    /// The document.
    let doc: DocumentID
    /// What it wrote.
    let writes: [Write]
    /// The edits whose revisions the peer held when the content it edited was read: the
    /// edits this one is causally after.
    let seen: Set<Int>
    /// True for a deletion of the document.
    let isDeletion: Bool
    /// True when it wrote the whole document anew (creating it).
    let rewritesDocument: Bool
    /// The revision it was recorded as.
    var rev: RevisionID?
}

/// What a document holds at the end, place by place.
struct FinalDocument {
    /// The values at each place (a row id can appear twice after two concurrent creations).
    var values: [Place: Set<PlaceValue>] = [:]

    /// A document that does not exist.
    static let deleted = FinalDocument(values: [.exists: [.absent]])

    /// Reads a JSON document's body.
    init(json: JSONValue) {
        values[.exists] = [.present]
        guard case .object(let o) = json else { return }
        for (key, value) in o where key.hasPrefix("f") {
            if let t = value.stringValue { values[.field(key), default: []].insert(.text(t)) }
        }
        for item in o["list"]?.arrayValue ?? [] {
            if let t = item.stringValue { values[.item(t), default: []].insert(.present) }
        }
        for row in o["rows"]?.arrayValue ?? [] {
            if let id = row["id"]?.stringValue, let v = row["v"]?.stringValue { values[.row(id), default: []].insert(.text(v)) }
        }
    }

    /// Reads a file document's text.
    init(text: String) {
        values = [.exists: [.present], .content: [.text(text)]]
    }

    private init(values: [Place: Set<PlaceValue>]) { self.values = values }

    /// True when `write` is what the document holds at its place.
    func holds(_ write: Write) -> Bool {
        let here = values[write.place] ?? [.absent]
        return write.value == .absent ? here == [.absent] : here.contains(write.value)
    }
}

/// Every edit of a simulation, and the test that none was lost (SPEC §2): a value an edit
/// wrote survives unless an edit that had seen it changed the same place, or an edit
/// concurrent with it did (then the winner rule decides). A deletion stands only against
/// what it had seen: a live edit concurrent with it wins.
struct EditHistory {
    private(set) var edits: [Edit] = []

    /// The number the next edit gets.
    var nextID: Int { edits.count + 1 }

    mutating func add(_ edit: Edit) { edits.append(edit) }

    /// The edits of `doc` whose revisions are among `revisions` (held by a peer).
    func known(in doc: DocumentID, holding revisions: (RevisionID) -> Bool) -> Set<Int> {
        Set(edits.filter { $0.doc == doc && $0.rev.map(revisions) == true }.map(\.id))
    }

    /// The edits of `doc` with their revisions (to look them up in a peer's tree).
    func revisions(of doc: DocumentID) -> [(id: Int, rev: RevisionID)] {
        edits.compactMap { edit in edit.doc == doc ? edit.rev.map { (edit.id, $0) } : nil }
    }

    /// One sentence per write that is gone without an excuse.
    func lostWrites(final: [DocumentID: FinalDocument]) -> [String] {
        var lost: [String] = []
        for edit in edits {
            let state = final[edit.doc] ?? .deleted
            for write in edit.writes where !state.holds(write) && !excused(write, of: edit) {
                let others = edits.filter { $0.id != edit.id && $0.doc == edit.doc && ($0.writes.contains { $0.place == write.place } || $0.isDeletion || $0.rewritesDocument) }
                    .map { o in "e\(o.id)\(o.seen.contains(edit.id) ? " (after)" : edit.seen.contains(o.id) ? " (before)" : " (concurrent)")" }
                lost.append("edit e\(edit.id) (peer \(edit.peer), \(edit.doc)) wrote \(write), which is gone; now \(state.values[write.place].map { $0.map(\.description).sorted() } ?? ["absent"]); other writers: \(others.joined(separator: ", "))")
            }
        }
        return lost
    }

    private func excused(_ write: Write, of edit: Edit) -> Bool {
        for other in edits where other.id != edit.id && other.doc == edit.doc {
            let later = other.seen.contains(edit.id)
            let concurrent = !later && !edit.seen.contains(other.id)
            guard later || concurrent else { continue }
            if other.isDeletion {
                // A deletion removes what it saw; one that did not see this edit loses to it.
                if later { return true }
                continue
            }
            // A deletion loses to a live edit it did not see, or one made after it.
            if edit.isDeletion { return true }
            // A creation writes every place; a concurrent one and an edit of the old
            // document are merged without a common body, place by place by the winner rule.
            if other.rewritesDocument || (edit.rewritesDocument && concurrent) { return true }
            if other.writes.contains(where: { $0.place == write.place }) { return true }
        }
        return false
    }
}
