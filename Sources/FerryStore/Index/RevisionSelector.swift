import FerryCore

/// How a person names one revision of a document on the command line (`DOC@REV`): a full id
/// or a unique prefix of one (`3-1a2b`), a unique prefix of the digest alone (`1a2b`), a
/// generation on the current revision's ancestry (`2`), or a count back from the current
/// revision (`-1`, its parent). Every command that takes a revision resolves it here, so they
/// all read `@…` alike.
public struct RevisionSelector: Sendable, Equatable, CustomStringConvertible {
    /// The forms a selector takes.
    public enum Form: Sendable, Equatable {
        /// `N-hex…`: the full id, or a prefix of its text.
        case idPrefix(String)
        /// `hex…`: a prefix of the digest, whatever the generation.
        case digestPrefix(String)
        /// `N`: the revision of generation N on the current revision's ancestry.
        case generation(Int)
        /// `-N`: N parents back from the current revision.
        case back(Int)
    }

    /// The parsed form.
    public let form: Form
    /// The text as given.
    public let text: String

    /// Why a selector names no revision, or more than one.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// What went wrong.
        public enum Kind: Sendable, Equatable {
            /// The text is no form of selector.
            case invalid
            /// Nothing matches.
            case unknown
            /// More than one revision matches (they are `candidates`, newest first).
            case ambiguous
        }
        /// What went wrong.
        public let kind: Kind
        /// One sentence for a person.
        public let message: String
        /// For `ambiguous`: every revision the prefix matches, newest first.
        public let candidates: [RevisionID]
        /// The message.
        public var description: String { message }
    }

    /// Parses a selector. All-digit text is a generation, never a digest prefix: `@2` is what
    /// people type, and a digest prefix of digits only can still be given with its generation.
    public init(_ text: String) throws(Failure) {
        self.text = text
        let lowered = text.lowercased()
        let bytes = Array(lowered.utf8)
        func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
        func isHex(_ b: UInt8) -> Bool { isDigit(b) || (b >= 0x61 && b <= 0x66) }
        let invalid = Failure(kind: .invalid, message: "invalid revision \(String(reflecting: text)): expected an id (3-1a2b…), a prefix of one, a digest prefix (1a2b), a generation (2) or -N", candidates: [])
        guard !bytes.isEmpty, bytes.count <= 80 else { throw invalid }
        if bytes.allSatisfy(isDigit) {
            guard let n = Int(lowered), n >= 1 else { throw invalid }
            form = .generation(n)
        } else if bytes[0] == UInt8(ascii: "-") {
            guard bytes.count > 1, bytes.dropFirst().allSatisfy(isDigit), let n = Int(lowered.dropFirst()) else { throw invalid }
            form = .back(n)
        } else if let dash = bytes.firstIndex(of: UInt8(ascii: "-")) {
            guard dash > 0, bytes[..<dash].allSatisfy(isDigit), bytes[(dash + 1)...].allSatisfy(isHex) else { throw invalid }
            form = .idPrefix(lowered)
        } else if bytes.allSatisfy(isHex) {
            form = .digestPrefix(lowered)
        } else {
            throw invalid
        }
    }

    /// The text as given.
    public var description: String { text }

    /// The revision of `doc` this names in `tree`. Ancestry-relative forms follow first
    /// parents from the current revision: the history the document's file has shown, not a
    /// losing branch beside it.
    public func resolve(in tree: RevisionTree, doc: DocumentID) throws(Failure) -> RevisionNode {
        let unknown = Failure(kind: .unknown, message: "\(doc) has no revision \(text)", candidates: [])
        switch form {
        case .generation(let n):
            guard let current = tree.current else { throw unknown }
            if let rev = tree.history(of: current.rev).first(where: { $0.generation == n }), let node = tree.nodes[rev] {
                return node
            }
            // Not on the current line (a branch that lost, or an ancestor never learnt): any
            // revision of that generation, if there is only one.
            return try Self.unique(tree.nodes.keys.filter { $0.generation == n }, in: tree, doc: doc, text: text, unknown: unknown)
        case .back(let n):
            guard let current = tree.current else { throw unknown }
            let line = tree.history(of: current.rev, limit: n + 1)
            guard line.count == n + 1, let node = tree.nodes[line[n]] else {
                throw Failure(kind: .unknown, message: "\(doc) has no revision \(text): its history holds \(line.count) revision\(line.count == 1 ? "" : "s") back from \(current.rev)", candidates: [])
            }
            return node
        case .idPrefix(let prefix):
            let keys = tree.nodes.keys
            if let exact = keys.first(where: { $0.description == prefix }), let node = tree.nodes[exact] { return node }
            return try Self.unique(keys.filter { $0.description.hasPrefix(prefix) }, in: tree, doc: doc, text: text, unknown: unknown)
        case .digestPrefix(let prefix):
            return try Self.unique(tree.nodes.keys.filter { $0.digest.hasPrefix(prefix) }, in: tree, doc: doc, text: text, unknown: unknown)
        }
    }

    private static func unique(_ matches: [RevisionID], in tree: RevisionTree, doc: DocumentID, text: String,
                               unknown: Failure) throws(Failure) -> RevisionNode {
        if matches.count == 1, let node = tree.nodes[matches[0]] { return node }
        guard matches.count > 1 else { throw unknown }
        let sorted = matches.sorted(by: >)
        throw Failure(kind: .ambiguous,
                      message: "revision \(text) of \(doc) is ambiguous: it matches \(sorted.map(\.description).joined(separator: ", "))",
                      candidates: sorted)
    }

    /// Splits `DOC@REV` into the document's name and the selector. A name may itself hold `@`,
    /// so the text after the last `@` is a selector only when it parses as one and what comes
    /// before names a document, or when the whole text names none (then the caller says that
    /// document is unknown, not that an odd name is). After a known document's name, text that
    /// is no selector is still taken as one, so that the error names the revision.
    public static func split(_ target: String, isDocument: (String) -> Bool) -> (doc: String, selector: String?) {
        guard let at = target.lastIndex(of: "@") else { return (target, nil) }
        let name = String(target[..<at])
        let rest = String(target[target.index(after: at)...])
        if isDocument(target) { return (target, nil) }
        if isDocument(name) || (try? RevisionSelector(rest)) != nil { return (name, rest) }
        return (target, nil)
    }
}
