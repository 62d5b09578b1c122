import FerryCore
import FuzzDriver

// Any bytes: the parser throws a syntax error or returns a value whose canonical form parses
// back to the same value and is a fixed point.
runFuzzer { bytes in
    guard let value = try? JSONParser.parse(bytes) else { return }
    let canonical = value.canonicalBytes
    guard let again = try? JSONParser.parse(canonical) else {
        fatalError("canonical form does not parse: \(String(decoding: canonical, as: UTF8.self))")
    }
    guard again == value else { fatalError("canonical form parses to another value") }
    guard again.canonicalBytes == canonical else { fatalError("canonical form is not a fixed point") }
}
