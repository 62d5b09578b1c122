import Synchronization

/// The origins (`"local"`, peers' ids) and author names of revisions, each kept once for the
/// whole process and named by a number: a folder has a few of them and many revisions, so a
/// node holds two 4-byte numbers instead of two 16-byte strings. Names are never forgotten;
/// there are as many as the logs a process opened name.
public enum NameTable {
    /// A name's number; `none` stands for no name.
    public struct Name: Sendable, Hashable {
        let number: UInt32
        /// No name (a revision whose author is unknown).
        public static let none = Name(number: 0)
    }

    private struct Names {
        var texts: [String] = [""]  // number 0: no name
        var numbers: [Bytes: UInt32] = [:]
    }

    /// A name compared by its UTF-8 bytes (Swift's `String ==` equates NFC and NFD forms; an
    /// author name travels to peers byte for byte).
    private struct Bytes: Hashable {
        let text: String
        static func == (a: Bytes, b: Bytes) -> Bool { a.text.utf8.elementsEqual(b.text.utf8) }
        func hash(into hasher: inout Hasher) {
            for byte in text.utf8 { hasher.combine(byte) }
        }
    }

    private static let names = Mutex(Names())

    /// The number of `text`, given one the first time it is seen.
    public static func name(_ text: String) -> Name {
        names.withLock { n in
            if let known = n.numbers[Bytes(text: text)] { return Name(number: known) }
            guard n.texts.count < Int(UInt32.max) else { preconditionFailure("more than 2^32 distinct names") }
            let number = UInt32(n.texts.count)
            n.texts.append(text)
            n.numbers[Bytes(text: text)] = number
            return Name(number: number)
        }
    }

    /// The text of `name`; nil for `none`.
    public static func text(_ name: Name) -> String? {
        guard name.number != 0 else { return nil }
        return names.withLock { $0.texts[Int(name.number)] }
    }
}
