import FerryProtocol
import FuzzDriver

// What a Couchbase Lite peer's bytes do to the BLIP codec: the input is a run of frames, each
// a 2-byte big-endian length and its bytes, handed to one connection's multiplexer in order.
// Anything may be refused with a BLIPError (the connection would close); nothing may crash,
// and what completes must be a message whose properties encode and decode again to themselves.
runFuzzer { bytes in
    let mux = BLIPMultiplexer(limits: BLIPLimits())
    var rest = bytes[...]
    while rest.count >= 2 {
        let length = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
        rest = rest.dropFirst(2)
        let frame = rest.prefix(length)
        rest = rest.dropFirst(frame.count)
        do {
            guard let message = try mux.receive(Array(frame)) else { continue }
            let encoded = try message.properties.encoded()
            guard (try? BLIPProperties.decode(encoded[...])) == message.properties else {
                fatalError("a received message's properties do not round-trip")
            }
            // Answering drives the outbox (ACKs, replies) as a connection would.
            if message.type == .request, !message.flags.contains(.noReply) {
                try mux.send(BLIPMessage(type: .response, number: message.number, flags: [], properties: message.properties, body: message.body))
            }
            while try mux.nextFrame() != nil {}
        } catch {
            return
        }
    }
}
