import FerryCore
import FuzzDriver

// Any bytes: the parser throws a syntax error or returns a value whose canonical form parses
// back to the same value and is a fixed point; the canonicalizer writes that canonical form or
// nothing, and with it the facts the check finds in what it wrote. Whatever the canonical check
// passes is a value's canonical form, with the facts a parse gives.
runFuzzer { bytes in
    if let facts = bytes.withUnsafeBufferPointer(CanonicalJSONCheck.object) {
        guard let value = try? JSONParser.parse(bytes), value.canonicalBytes == bytes else {
            fatalError("the check passed what is not canonical: \(String(decoding: bytes, as: UTF8.self))")
        }
        guard facts.prettySize == value.prettyBytes.count, facts.blobReferences == (try? value.blobReferences()) else {
            fatalError("the check's facts differ from the parsed value's: \(String(decoding: bytes, as: UTF8.self))")
        }
    }
    let written = bytes.withUnsafeBufferPointer(JSONCanonicalizer.canonicalBytes(of:))
    guard let value = try? JSONParser.parse(bytes) else {
        if written != nil { fatalError("the canonicalizer wrote what the parser refuses: \(String(decoding: bytes, as: UTF8.self))") }
        return
    }
    let canonical = value.canonicalBytes
    if let written, written != canonical {
        fatalError("the canonicalizer wrote another text than the parse's: \(String(decoding: bytes, as: UTF8.self))")
    }
    guard let again = try? JSONParser.parse(canonical) else {
        fatalError("canonical form does not parse: \(String(decoding: canonical, as: UTF8.self))")
    }
    guard again == value else { fatalError("canonical form parses to another value") }
    guard again.canonicalBytes == canonical else { fatalError("canonical form is not a fixed point") }
    let checked = canonical.withUnsafeBufferPointer(CanonicalJSONCheck.object)
    if let facts = checked {
        guard facts.prettySize == value.prettyBytes.count, facts.blobReferences == (try? value.blobReferences()) else {
            fatalError("the check's facts differ from the value's: \(String(decoding: canonical, as: UTF8.self))")
        }
    }
    let gathered = bytes.withUnsafeBufferPointer(JSONCanonicalizer.canonicalObject(of:))
    if let gathered, gathered.bytes != canonical || gathered.facts != checked {
        fatalError("the canonicalizer's facts differ from the check's: \(String(decoding: bytes, as: UTF8.self))")
    }
    if gathered == nil, written != nil, checked != nil {
        fatalError("the canonicalizer gave no facts where the check finds some: \(String(decoding: bytes, as: UTF8.self))")
    }
}
