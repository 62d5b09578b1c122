import CZlib

/// The sending half of a BLIP connection's codec: one raw-deflate context and one running
/// CRC32 for everything this side sends. Frames must be encoded in the order they are sent,
/// since both the deflate window and the checksum run across frames (and across messages).
public final class BLIPFrameEncoder {
    private var stream: UnsafeMutablePointer<z_stream>?
    private let level: Int32
    /// CRC32 of all uncompressed data of the non-ACK frames encoded so far.
    public private(set) var checksum: UInt32 = 0

    /// An encoder; `compressionLevel` is zlib's 0–9 (LiteCore uses 6).
    public init(compressionLevel: Int32 = 6) {
        level = max(0, min(9, compressionLevel))
    }

    deinit {
        if let stream {
            deflateEnd(stream)
            stream.deallocate()
        }
    }

    /// Encodes one frame: number and flags as varints, then the data (deflated with a sync
    /// flush and its `00 00 FF FF` trailer removed when `flags` says compressed), then the
    /// big-endian CRC32 of all uncompressed data sent so far. ACK frames carry their data as it
    /// is, with no checksum. Empty data is never compressed: zlib emits nothing for a second
    /// sync flush in a row, and BLIP lets each frame choose.
    public func encode(number: UInt64, flags: BLIPFrameFlags, data: ArraySlice<UInt8>) throws(BLIPError) -> [UInt8] {
        var flags = flags
        if data.isEmpty { flags.remove(.compressed) }
        var out: [UInt8] = []
        out.reserveCapacity(data.count + 24)
        BLIPVarint.append(number, to: &out)
        if flags.type?.isAck == true {
            flags.remove(.compressed)
            BLIPVarint.append(UInt64(flags.rawValue), to: &out)
            out += data
            return out
        }
        BLIPVarint.append(UInt64(flags.rawValue), to: &out)
        if flags.contains(.compressed) {
            try deflate(data, into: &out)
        } else {
            out += data
        }
        checksum = BLIPCRC32.update(checksum, data)
        out += [UInt8(checksum >> 24), UInt8((checksum >> 16) & 0xFF), UInt8((checksum >> 8) & 0xFF), UInt8(checksum & 0xFF)]
        return out
    }

    private func deflate(_ data: ArraySlice<UInt8>, into out: inout [UInt8]) throws(BLIPError) {
        let z = try openStream()
        let start = out.count
        var result: Int32 = Z_OK
        var input = Array(data)
        let bound = Int(deflateBound(z, uLong(input.count))) + 16
        var buffer = [UInt8](repeating: 0, count: bound)
        input.withUnsafeMutableBufferPointer { inp in
            z.pointee.next_in = inp.baseAddress
            z.pointee.avail_in = uInt(inp.count)
            repeat {
                buffer.withUnsafeMutableBufferPointer { buf in
                    z.pointee.next_out = buf.baseAddress
                    z.pointee.avail_out = uInt(buf.count)
                    result = CZlib.deflate(z, Z_SYNC_FLUSH)
                    out += buf[0..<(buf.count - Int(z.pointee.avail_out))]
                }
            } while result == Z_OK && (z.pointee.avail_out == 0 || z.pointee.avail_in > 0)
            z.pointee.next_in = nil
            z.pointee.next_out = nil
        }
        guard result == Z_OK, out.count - start >= 4, Array(out[(out.count - 4)...]) == blipDeflateTrailer else {
            throw BLIPError(.badCompression, "deflate failed (\(result))")
        }
        out.removeLast(4)
    }

    private func openStream() throws(BLIPError) -> UnsafeMutablePointer<z_stream> {
        if let stream { return stream }
        let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        z.initialize(to: z_stream())
        // Negative window bits: raw deflate, no zlib header or Adler-32 (BLIP has its own CRC).
        // Memory level 9, as LiteCore.
        let r = deflateInit2_(z, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        guard r == Z_OK else {
            z.deallocate()
            throw BLIPError(.badCompression, "deflateInit2 failed (\(r))")
        }
        stream = z
        return z
    }
}

/// zlib's CRC32 over byte slices of any size (zlib takes a 32-bit length).
enum BLIPCRC32 {
    static func update(_ crc: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.withUnsafeBufferPointer { buf in
            var c = uLong(crc)
            var p = buf.baseAddress
            var left = buf.count
            while left > 0, let q = p {
                let n = min(left, 1 << 30)
                c = crc32(c, q, uInt(n))
                p = q + n
                left -= n
            }
            return UInt32(truncatingIfNeeded: c)
        }
    }
}
