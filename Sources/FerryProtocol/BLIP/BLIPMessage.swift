/// A complete BLIP request, response or error reply: what the application sends and gets.
public struct BLIPMessage: Sendable, Equatable {
    /// `request`, `response` or `error` (never an ACK type: ACKs are frames, not messages).
    public var type: BLIPMessageType
    /// The request number (a response carries its request's); a request's is assigned when queued.
    public var number: UInt64
    /// `compressed`, `urgent`, `noReply`; never `moreComing`, which belongs to frames.
    public var flags: BLIPFrameFlags
    /// The properties, in wire order.
    public var properties: BLIPProperties
    /// The body, uncompressed.
    public var body: [UInt8]

    /// A message; `flags` is stripped of type bits and `moreComing`.
    public init(type: BLIPMessageType, number: UInt64 = 0, flags: BLIPFrameFlags = [], properties: BLIPProperties = [:], body: [UInt8] = []) {
        self.type = type
        self.number = number
        self.flags = flags.options.subtracting(.moreComing)
        self.properties = properties
        self.body = body
    }

    /// A request for `profile` (the `Profile` property, first, as LiteCore writes it).
    public static func request(profile: String, properties: BLIPProperties = [:], body: [UInt8] = [], flags: BLIPFrameFlags = []) -> BLIPMessage {
        var all = BLIPProperties([BLIPProperty("Profile", profile)])
        all.entries += properties.entries
        return BLIPMessage(type: .request, flags: flags, properties: all, body: body)
    }

    /// A response to `request`; urgent when the request was, as LiteCore answers.
    public static func response(to request: BLIPMessage, properties: BLIPProperties = [:], body: [UInt8] = [], compressed: Bool = false) -> BLIPMessage {
        var flags = request.flags.intersection(.urgent)
        if compressed { flags.insert(.compressed) }
        return BLIPMessage(type: .response, number: request.number, flags: flags, properties: properties, body: body)
    }

    /// An error reply to `request`: `Error-Domain` and `Error-Code` properties, the message as
    /// the UTF-8 body (the spec's layout; LiteCore reads it back the same way).
    public static func error(to request: BLIPMessage, _ reply: BLIPErrorReply) -> BLIPMessage {
        BLIPMessage(type: .error, number: request.number, flags: request.flags.intersection(.urgent),
                    properties: ["Error-Domain": reply.domain, "Error-Code": String(reply.code)],
                    body: Array(reply.message.utf8))
    }

    /// The `Profile` property: what a request asks for.
    public var profile: String? { properties["Profile"] }

    /// The flags of this message's frames (type bits included, `moreComing` not).
    public var frameFlags: BLIPFrameFlags { BLIPFrameFlags(type: type, flags) }

    /// For an error reply, its domain, code and message; nil for anything else. A missing
    /// domain is "BLIP" (the spec's default); a missing or non-numeric code reads as 0, as in LiteCore.
    public var errorReply: BLIPErrorReply? {
        guard type == .error else { return nil }
        return BLIPErrorReply(domain: properties["Error-Domain"] ?? "BLIP",
                              code: properties["Error-Code"].flatMap { Int32($0) } ?? 0,
                              message: String(decoding: body, as: UTF8.self))
    }

    /// The message's bytes before framing: varint length of the property block, the block, the body.
    public func payload(limits: BLIPLimits = BLIPLimits()) throws(BLIPError) -> [UInt8] {
        let block = try properties.encoded(limits: limits)
        var out: [UInt8] = []
        out.reserveCapacity(block.count + body.count + 3)
        BLIPVarint.append(UInt64(block.count), to: &out)
        out += block
        out += body
        return out
    }

    /// Splits a received payload into properties and body.
    public static func decode(type: BLIPMessageType, number: UInt64, flags: BLIPFrameFlags, payload: [UInt8], limits: BLIPLimits = BLIPLimits()) throws(BLIPError) -> BLIPMessage {
        var i = payload.startIndex
        guard !payload.isEmpty else { throw BLIPError(.truncated, "\(type.name) #\(number) has no property length") }
        let length = try BLIPVarint.read(payload[...], at: &i)
        guard length <= UInt64(limits.maxPropertiesBytes) else {
            throw BLIPError(.tooLarge, "\(type.name) #\(number): properties of \(length) bytes, over \(limits.maxPropertiesBytes)")
        }
        guard Int(length) <= payload.count - i else {
            throw BLIPError(.truncated, "\(type.name) #\(number) ends before the end of its properties")
        }
        let properties = try BLIPProperties.decode(payload[i..<(i + Int(length))], limits: limits)
        return BLIPMessage(type: type, number: number, flags: flags, properties: properties, body: Array(payload[(i + Int(length))...]))
    }
}

/// What an ERR message says: a domain ("BLIP", "HTTP", …), a code, and a message.
public struct BLIPErrorReply: Sendable, Equatable, Error {
    /// `Error-Domain`; LiteCore's replicator answers in "HTTP" (404 for a missing checkpoint) and "BLIP".
    public var domain: String
    /// `Error-Code`, a signed 32-bit decimal.
    public var code: Int32
    /// The body, UTF-8; may be empty.
    public var message: String

    /// An error reply.
    public init(domain: String, code: Int32, message: String = "") {
        self.domain = domain
        self.code = code
        self.message = message
    }
}
