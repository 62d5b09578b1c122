// Test support: TCP connections rebuilt from segments, each direction as ordered bytes that
// remember which packet brought them.

/// One direction of a connection: its bytes in sequence order, and per byte range the packet.
struct TCPDirection {
    var bytes: [UInt8] = []
    /// (end offset in `bytes`, packet index) for each run of bytes appended.
    var runs: [(end: Int, packet: Int)] = []

    /// The packet that delivered byte `offset`.
    func packet(at offset: Int) -> Int {
        var lo = 0, hi = runs.count - 1
        while lo < hi {
            let mid = (lo + hi) / 2
            if runs[mid].end > offset { hi = mid } else { lo = mid + 1 }
        }
        return runs[lo].packet
    }
}

struct TCPConnection {
    var client: Endpoint
    var server: Endpoint
    var firstPacket: Int
    var toServer = TCPDirection()
    var toClient = TCPDirection()
}

enum TCPStreams {
    /// Groups segments by connection (the side that sent a bare SYN is the client), then
    /// orders each direction's bytes by sequence number, dropping retransmitted bytes; a gap
    /// (a lost segment) fails.
    static func connections(_ segments: [TCPSegment]) throws -> [TCPConnection] {
        struct Key: Hashable { var a: Endpoint, b: Endpoint }
        func key(_ s: TCPSegment) -> Key {
            s.source.description < s.destination.description ? Key(a: s.source, b: s.destination) : Key(a: s.destination, b: s.source)
        }
        var order: [Key] = []
        var grouped: [Key: [TCPSegment]] = [:]
        for s in segments {
            let k = key(s)
            if grouped[k] == nil { order.append(k) }
            grouped[k, default: []].append(s)
        }
        var out: [TCPConnection] = []
        for k in order {
            let segs = grouped[k]!
            guard let syn = segs.first(where: { $0.syn && !$0.ack }) else {
                throw PcapError("a connection \(k.a) – \(k.b) without its SYN (capture started late)")
            }
            var conn = TCPConnection(client: syn.source, server: syn.destination, firstPacket: segs[0].packet)
            conn.toServer = try assemble(segs.filter { $0.source == syn.source })
            conn.toClient = try assemble(segs.filter { $0.source == syn.destination })
            out.append(conn)
        }
        return out
    }

    private static func assemble(_ segs: [TCPSegment]) throws -> TCPDirection {
        var d = TCPDirection()
        guard let syn = segs.first(where: { $0.syn }) else { return d }
        let isn = syn.sequence &+ 1
        let data = segs.filter { !$0.payload.isEmpty }
            .map { (rel: Int($0.sequence &- isn), seg: $0) }
            .sorted { $0.rel != $1.rel ? $0.rel < $1.rel : $0.seg.packet < $1.seg.packet }
        for (rel, seg) in data {
            guard rel <= d.bytes.count else { throw PcapError("a gap in a TCP stream at \(d.bytes.count) (a segment was lost)") }
            let skip = d.bytes.count - rel
            guard skip < seg.payload.count else { continue }   // a retransmission
            d.bytes += seg.payload.dropFirst(skip)
            d.runs.append((d.bytes.count, seg.packet))
        }
        return d
    }
}
