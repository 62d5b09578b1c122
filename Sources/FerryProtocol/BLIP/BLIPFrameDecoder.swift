import CZlib

/// The receiving half of a BLIP connection's codec: one raw-inflate context and one running
/// CRC32 for everything the peer sends. Frames must be decoded in the order they arrived.
/// After any error the decoder refuses everything: its inflate window and checksum no longer
/// match the peer's, so the connection has to close.
public final class BLIPFrameDecoder {
    private var stream: UnsafeMutablePointer<z_stream>?
    private let limits: BLIPLimits
    private var failure: BLIPError?
    /// CRC32 of all uncompressed data of the non-ACK frames decoded so far.
    public private(set) var checksum: UInt32 = 0

    /// A decoder bounded by `limits`.
    public init(limits: BLIPLimits = BLIPLimits()) {
        self.limits = limits
    }

    deinit {
        if let stream {
            inflateEnd(stream)
            stream.deallocate()
        }
    }

    /// Decodes one frame (one WebSocket binary message). Returns nil for a frame of a type BLIP
    /// leaves undefined, which LiteCore skips for forward compatibility (it touches neither the
    /// inflate context nor the checksum). Throws on a bad header, a missing or wrong checksum,
    /// data zlib cannot inflate, and anything over the limits.
    public func decode(_ frame: ArraySlice<UInt8>) throws(BLIPError) -> BLIPFrame? {
        if let failure { throw failure }
        do {
            return try decodeUnchecked(frame)
        } catch {
            failure = error
            throw error
        }
    }

    /// Decodes one frame from an array.
    public func decode(_ frame: [UInt8]) throws(BLIPError) -> BLIPFrame? {
        try decode(frame[...])
    }

    private func decodeUnchecked(_ frame: ArraySlice<UInt8>) throws(BLIPError) -> BLIPFrame? {
        guard frame.count <= limits.maxFrameBytes else {
            throw BLIPError(.tooLarge, "a frame of \(frame.count) bytes, over \(limits.maxFrameBytes)")
        }
        var i = frame.startIndex
        let number = try BLIPVarint.read(frame, at: &i)
        let rawFlags = try BLIPVarint.read(frame, at: &i)
        // Bits past the defined ones are ignored, as the spec asks.
        let flags = BLIPFrameFlags(rawValue: UInt8(truncatingIfNeeded: rawFlags) & 0x7F)
        guard let type = flags.type else { return nil }
        let payload = frame[i...]
        if type.isAck {
            return BLIPFrame(number: number, flags: flags, data: Array(payload), wirePayloadCount: payload.count)
        }
        guard payload.count >= 4 else { throw BLIPError(.truncated, "\(type.name) #\(number) ends before its checksum") }
        let body = payload.dropLast(4)
        let c = payload.suffix(4).map(UInt32.init)
        let sent = c[0] << 24 | c[1] << 16 | c[2] << 8 | c[3]
        let data: [UInt8]
        if flags.contains(.compressed) {
            data = try inflate(body)
        } else {
            data = Array(body)
        }
        checksum = BLIPCRC32.update(checksum, data[...])
        guard checksum == sent else {
            throw BLIPError(.badChecksum, "\(type.name) #\(number): checksum \(hex(sent)), expected \(hex(checksum))")
        }
        return BLIPFrame(number: number, flags: flags, data: data, wirePayloadCount: payload.count)
    }

    private func hex(_ v: UInt32) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 8 - s.count) + s
    }

    private func inflate(_ body: ArraySlice<UInt8>) throws(BLIPError) -> [UInt8] {
        let z = try openStream()
        var input = Array(body)
        input += blipDeflateTrailer
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(64 << 10, limits.maxInflatedFrameBytes + 1))
        var result: Int32 = Z_OK
        var overflow = false
        input.withUnsafeMutableBufferPointer { inp in
            z.pointee.next_in = inp.baseAddress
            z.pointee.avail_in = uInt(inp.count)
            while true {
                var produced = 0
                chunk.withUnsafeMutableBufferPointer { buf in
                    z.pointee.next_out = buf.baseAddress
                    z.pointee.avail_out = uInt(buf.count)
                    result = CZlib.inflate(z, Z_SYNC_FLUSH)
                    produced = buf.count - Int(z.pointee.avail_out)
                }
                // Checked per chunk, so a bomb costs at most one chunk past the limit.
                if out.count + produced > limits.maxInflatedFrameBytes { overflow = true; break }
                out += chunk[0..<produced]
                if result != Z_OK { break }
                if z.pointee.avail_in == 0 && z.pointee.avail_out > 0 { break }
            }
            z.pointee.next_in = nil
            z.pointee.next_out = nil
        }
        if overflow {
            throw BLIPError(.tooLarge, "a compressed frame inflates to over \(limits.maxInflatedFrameBytes) bytes")
        }
        switch result {
        case Z_OK:
            break
        case Z_BUF_ERROR where z.pointee.avail_in == 0:
            break  // nothing left to do: not an error
        case Z_STREAM_END:
            throw BLIPError(.badCompression, "a compressed frame ends the deflate stream (BLIP's never ends)")
        default:
            let why = z.pointee.msg.map { String(cString: $0) } ?? "zlib error \(result)"
            throw BLIPError(.badCompression, "cannot inflate a frame: \(why)")
        }
        guard z.pointee.avail_in == 0 else { throw BLIPError(.badCompression, "a compressed frame has bytes past its data") }
        return out
    }

    private func openStream() throws(BLIPError) -> UnsafeMutablePointer<z_stream> {
        if let stream { return stream }
        let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        z.initialize(to: z_stream())
        // Negative window bits: raw deflate, as the peer's deflater writes it.
        let r = inflateInit2_(z, -15, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard r == Z_OK else {
            z.deallocate()
            throw BLIPError(.badCompression, "inflateInit2 failed (\(r))")
        }
        stream = z
        return z
    }
}
