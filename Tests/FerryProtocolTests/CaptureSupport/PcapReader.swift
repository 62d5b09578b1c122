// Test support: reads classic libpcap files down to TCP segments. Enough for the Couchbase
// Lite captures (and the other link types tcpdump writes on Linux); not product code.

struct PcapError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// One TCP segment with its endpoints and the index of the packet that carried it.
struct TCPSegment {
    var packet: Int
    var source: Endpoint
    var destination: Endpoint
    var sequence: UInt32
    var flags: UInt8
    var payload: ArraySlice<UInt8>

    var syn: Bool { flags & 0x02 != 0 }
    var ack: Bool { flags & 0x10 != 0 }
}

/// An address (4 or 16 bytes) and port.
struct Endpoint: Hashable, CustomStringConvertible {
    var address: [UInt8]
    var port: UInt16
    var description: String { "\(address.map(String.init).joined(separator: ".")):\(port)" }
}

enum PcapReader {
    /// Link types read: Ethernet, Linux cooked v1 and v2, BSD loopback (null), raw IP.
    static let ethernet: UInt32 = 1, linuxSLL: UInt32 = 113, linuxSLL2: UInt32 = 276, null: UInt32 = 0, loop: UInt32 = 108
    static let rawTypes: Set<UInt32> = [12, 14, 101, 228, 229]

    static func segments(_ file: [UInt8]) throws -> (linkType: UInt32, packets: Int, segments: [TCPSegment]) {
        guard file.count >= 24 else { throw PcapError("shorter than a pcap header") }
        let magicLE = le32(file, 0)
        let bigEndian: Bool
        switch magicLE {
        case 0xA1B2_C3D4, 0xA1B2_3C4D: bigEndian = false
        case 0xD4C3_B2A1, 0x4D3C_B2A1: bigEndian = true
        default: throw PcapError("not a classic pcap file (magic \(String(magicLE, radix: 16)))")
        }
        func u32(_ at: Int) -> UInt32 { bigEndian ? be32(file, at) : le32(file, at) }
        let linkType = u32(20) & 0x0FFF_FFFF
        var offset = 24
        var packets = 0
        var out: [TCPSegment] = []
        while offset < file.count {
            guard offset + 16 <= file.count else { throw PcapError("truncated record header") }
            let included = Int(u32(offset + 8)), original = Int(u32(offset + 12))
            offset += 16
            guard offset + included <= file.count else { throw PcapError("truncated packet") }
            guard included == original else { throw PcapError("packet \(packets) cut by the snap length") }
            let packet = file[offset..<(offset + included)]
            offset += included
            if let seg = try parse(packet, linkType: linkType, index: packets) { out.append(seg) }
            packets += 1
        }
        return (linkType, packets, out)
    }

    private static func parse(_ p: ArraySlice<UInt8>, linkType: UInt32, index: Int) throws -> TCPSegment? {
        let s = p.startIndex
        var ipStart: Int
        var etherType: UInt16?
        switch linkType {
        case ethernet:
            guard p.count >= 14 else { return nil }
            var at = s + 12
            var type = be16(p, at)
            while type == 0x8100 || type == 0x88A8 { at += 4; type = be16(p, at) }   // VLAN tags
            etherType = type
            ipStart = at + 2
        case linuxSLL:
            guard p.count >= 16 else { return nil }
            etherType = be16(p, s + 14)
            ipStart = s + 16
        case linuxSLL2:
            guard p.count >= 20 else { return nil }
            etherType = be16(p, s)
            ipStart = s + 20
        case null, loop:
            guard p.count >= 4 else { return nil }
            let family = linkType == loop ? be32(p, s) : min(le32(p, s), be32(p, s))
            etherType = family == 2 ? 0x0800 : (family == 24 || family == 28 || family == 30 ? 0x86DD : 0)
            ipStart = s + 4
        default:
            guard rawTypes.contains(linkType) else { throw PcapError("link type \(linkType) not supported") }
            etherType = nil
            ipStart = s
        }
        guard ipStart < p.endIndex else { return nil }
        let version = p[ipStart] >> 4
        if let etherType, etherType != 0x0800 && etherType != 0x86DD { return nil }
        var src: [UInt8], dst: [UInt8], tcpStart: Int, ipEnd: Int
        if version == 4 {
            let ihl = Int(p[ipStart] & 0x0F) * 4
            let total = Int(be16(p, ipStart + 2))
            guard p[ipStart + 9] == 6 else { return nil }
            let fragment = be16(p, ipStart + 6)
            guard fragment & 0x3FFF == 0 else { throw PcapError("packet \(index): IP fragments are not reassembled") }
            src = Array(p[(ipStart + 12)..<(ipStart + 16)])
            dst = Array(p[(ipStart + 16)..<(ipStart + 20)])
            tcpStart = ipStart + ihl
            ipEnd = min(p.endIndex, ipStart + total)     // Ethernet pads short frames
        } else if version == 6 {
            guard p[ipStart + 6] == 6 else { return nil }   // no extension headers in these captures
            src = Array(p[(ipStart + 8)..<(ipStart + 24)])
            dst = Array(p[(ipStart + 24)..<(ipStart + 40)])
            tcpStart = ipStart + 40
            ipEnd = min(p.endIndex, tcpStart + Int(be16(p, ipStart + 4)))
        } else {
            return nil
        }
        let dataOffset = Int(p[tcpStart + 12] >> 4) * 4
        return TCPSegment(packet: index,
                          source: Endpoint(address: src, port: be16(p, tcpStart)),
                          destination: Endpoint(address: dst, port: be16(p, tcpStart + 2)),
                          sequence: be32(p, tcpStart + 4), flags: p[tcpStart + 13],
                          payload: p[(tcpStart + dataOffset)..<ipEnd])
    }
}

func be16<C: Collection>(_ b: C, _ at: Int) -> UInt16 where C.Index == Int, C.Element == UInt8 { UInt16(b[at]) << 8 | UInt16(b[at + 1]) }
func be32<C: Collection>(_ b: C, _ at: Int) -> UInt32 where C.Index == Int, C.Element == UInt8 {
    UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
}
func le32<C: Collection>(_ b: C, _ at: Int) -> UInt32 where C.Index == Int, C.Element == UInt8 {
    UInt32(b[at + 3]) << 24 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 1]) << 8 | UInt32(b[at])
}
