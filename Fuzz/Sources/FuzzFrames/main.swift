import FerryCore
import FerryProtocol
import FuzzDriver

/// The request types a response may answer, chosen by the response's number so that every
/// response shape is reachable.
let answerable = ["hello", "getCheckpoint", "setCheckpoint", "subChanges", "changes", "proposeChanges", "rev", "getAttachment"]

// Any text frame: the decoder refuses it or returns a frame that encodes to text decoding
// to the same frame; any binary frame likewise.
runFuzzer { bytes in
    let requestType: (Int) -> String? = { n in n >= 0 ? answerable[n % answerable.count] : nil }
    if let frame = try? FrameCodec.decode(bytes, requestType: requestType) {
        let text = FrameCodec.encode(frame)
        guard let again = try? FrameCodec.decode(text, requestType: requestType) else {
            fatalError("an encoded frame does not decode: \(String(decoding: text, as: UTF8.self))")
        }
        guard again == frame else { fatalError("an encoded frame decodes to another frame") }
        // A body taken as its bytes is a value's canonical form.
        if case .request(_, _, .rev(_, _, _, _, .canonicalJSON(let body), _, _)) = frame {
            guard body.checked != nil, let value = try? JSONParser.parse(body.bytes), value.canonicalBytes == body.bytes else {
                fatalError("a body taken as its bytes is not canonical: \(String(decoding: body.bytes, as: UTF8.self))")
            }
        }
    }
    if let chunk = try? BlobChunk.decode(bytes) {
        guard chunk.encoded() == bytes else { fatalError("a binary frame does not re-encode to its bytes") }
    }
}
