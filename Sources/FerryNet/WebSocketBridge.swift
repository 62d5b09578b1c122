import FerryProtocol
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket

/// Which end of a WebSocket this is: a client masks every frame it sends and refuses masked
/// frames; a server refuses unmasked ones (RFC 6455 §5.1).
enum WebSocketRole: Sendable {
    case client, server
}

/// The last handler of an upgraded pipeline: hands text and binary messages (already
/// reassembled by `NIOWebSocketFrameAggregator`) to a bounded `TransportInbox`, stops reading
/// the socket while the inbox is full, answers pings, and runs the closing handshake.
final class WebSocketBridge: ChannelDuplexHandler, Sendable {
    /// Adds an upgraded WebSocket's handlers behind NIO's frame codec (the masking rule, the
    /// aggregator that reassembles fragments up to `maxMessageBytes`, the bridge) and starts it.
    static func install(on channel: Channel, role: WebSocketRole, maxMessageBytes: Int) throws -> WebSocketBridge {
        let bridge = WebSocketBridge(role: role, maxMessageBytes: maxMessageBytes)
        let aggregator = NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1 << 16,
                                                     maxAccumulatedFrameSize: maxMessageBytes)
        try channel.pipeline.syncOperations.addHandlers([MaskingRule(bridge: bridge), aggregator, bridge])
        bridge.attach(to: channel)
        return bridge
    }

    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let role: WebSocketRole
    let inbox: TransportInbox
    /// The largest message taken (NIO's decoder and aggregator enforce it); named in the close
    /// frame that refuses a larger one.
    let maxMessageBytes: Int
    private struct State {
        var closeSent = false
        var closeReason: CloseReason?
        /// When the last frame of any kind (a pong included) arrived: the heartbeat's evidence.
        var lastInbound = NIODeadline.now()
        /// The inbox is full: reads are held until it has room.
        var paused = false
        /// NIO asked to read while paused.
        var readHeld = false
    }
    private let state = NIOLockedValueBox(State())

    init(role: WebSocketRole, maxMessageBytes: Int, inbox: TransportInbox = TransportInbox()) {
        self.role = role
        self.maxMessageBytes = maxMessageBytes
        self.inbox = inbox
    }

    /// Starts reading again when the inbox has room (called once the bridge is in `channel`).
    func attach(to channel: Channel) {
        inbox.setOnRoom { [self] in
            channel.eventLoop.execute {
                let held = self.state.withLockedValue { s -> Bool in
                    s.paused = false
                    defer { s.readHeld = false }
                    return s.readHeld
                }
                if held { channel.read() }
            }
        }
    }

    var closeReason: CloseReason? { state.withLockedValue { $0.closeReason } }

    /// A frame as this end must send it: masked with a fresh key from a client, plain from a server.
    func outgoing(_ opcode: WebSocketOpcode, _ data: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, maskKey: role == .client ? MaskingKeySource.next() : nil, data: data)
    }

    func read(context: ChannelHandlerContext) {
        let hold = state.withLockedValue { s -> Bool in
            if s.paused { s.readHeld = true }
            return s.paused
        }
        if !hold { context.read() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        state.withLockedValue { $0.lastInbound = .now() }
        switch frame.opcode {
        case .text, .binary:
            let bytes = Array(buffer: frame.unmaskedData)
            let message: TransportMessage = frame.opcode == .text ? .text(bytes) : .binary(bytes)
            if !inbox.yield(message) { state.withLockedValue { $0.paused = true } }
        case .ping:
            context.writeAndFlush(wrapOutboundOut(outgoing(.pong, frame.unmaskedData)), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self) ?? 1005
            let reason = data.readString(length: data.readableBytes) ?? ""
            let mustAnswer = state.withLockedValue { s -> Bool in
                if s.closeReason == nil { s.closeReason = CloseReason(code: code, reason: reason) }
                defer { s.closeSent = true }
                return !s.closeSent
            }
            inbox.finish()
            if mustAnswer {
                var echo = context.channel.allocator.buffer(capacity: 2)
                echo.writeInteger(code == 1005 ? 1000 : code)
                context.writeAndFlush(wrapOutboundOut(outgoing(.connectionClose, echo)))
                    .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
                // A peer that stopped reading never takes the echo: the connection would stay
                // open, and counted against the listener's limit.
                Self.closeAfterGrace(context.channel)
            } else {
                context.close(promise: nil)
            }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.withLockedValue { s in
            if s.closeReason == nil { s.closeReason = CloseReason(code: 1006, reason: "connection dropped") }
        }
        inbox.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A frame or a message over the limit, or a malformed one: the peer is told why in the
        // close frame (NIO's own error handling would send the code alone).
        if let (code, reason) = Self.closeFrame(for: error, limit: maxMessageBytes) {
            initiateClose(channel: context.channel, code: code, reason: reason)
            return
        }
        let closing = state.withLockedValue { s -> Bool in
            if s.closeReason == nil { s.closeReason = CloseReason(code: 1002, reason: "\(error)") }
            return s.closeSent
        }
        inbox.finish()
        // Once a close frame is sent, what still arrives is dropped (NIO's decoder reports each
        // read after its error as one) until the peer closes or the grace ends: closing with
        // bytes unread would reset the connection, and the peer might never read the reason.
        if !closing { context.close(promise: nil) }
    }

    /// The close code and reason (at most 123 bytes, as a close frame allows) for an error of
    /// NIO's WebSocket decoder or frame aggregator; nil for any other error.
    static func closeFrame(for error: Error, limit: Int) -> (code: UInt16, reason: String)? {
        let tooLarge = "message too large: the limit is \(limit) bytes"
        switch error {
        case NIOWebSocketError.invalidFrameLength, NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge:
            return (1009, tooLarge)
        case NIOWebSocketFrameAggregator.Error.tooManyFragments:
            return (1009, "message in too many fragments")
        case NIOWebSocketError.fragmentedControlFrame:
            return (1002, "a control frame may not be fragmented (RFC 6455 section 5.5)")
        case NIOWebSocketError.multiByteControlFrameLength:
            return (1002, "a control frame may carry at most 125 bytes (RFC 6455 section 5.5)")
        case NIOWebSocketFrameAggregator.Error.receivedNewFrameWithoutFinishingPrevious,
             NIOWebSocketFrameAggregator.Error.didReceiveFragmentBeforeReceivingTextOrBinaryFrame:
            return (1002, "a fragment out of order (RFC 6455 section 5.4)")
        case NIOWebSocketFrameAggregator.Error.nonFinalFragmentSizeIsTooSmall:
            return (1002, "a fragment too small")
        default:
            return nil
        }
    }

    /// Pings the peer every `interval`; closes the connection (`closeCode`: one that asks the
    /// peer to come back) when nothing at all has arrived for two intervals, so a peer that
    /// vanished without a FIN is noticed.
    func startHeartbeat(channel: Channel, interval: TimeAmount, closeCode: UInt16 = 1001) {
        let task = channel.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] task in
            let silent = NIODeadline.now() - state.withLockedValue { $0.lastInbound }
            if silent > interval * 2 {
                task.cancel()
                initiateClose(channel: channel, code: closeCode, reason: "no answer to heartbeat for \(silent.nanoseconds / 1_000_000) ms")
                return
            }
            channel.writeAndFlush(outgoing(.ping, channel.allocator.buffer(capacity: 0)), promise: nil)
        }
        channel.closeFuture.whenComplete { _ in task.cancel() }
    }

    /// Sends a close frame (once) and closes the channel when the peer answers or after a
    /// bounded wait.
    func initiateClose(channel: Channel, code: UInt16, reason: String) {
        let first = state.withLockedValue { s -> Bool in
            defer { s.closeSent = true }
            if s.closeReason == nil { s.closeReason = CloseReason(code: code, reason: reason) }
            return !s.closeSent
        }
        inbox.finish()
        guard first else { return }
        var data = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code)
        data.writeString(String(reason.prefix(120)))
        channel.writeAndFlush(outgoing(.connectionClose, data), promise: nil)
        // The peer should answer and close; don't wait for ever if it does not.
        Self.closeAfterGrace(channel)
    }

    /// Closes `channel` in 2 s unless it has closed by then: the closing handshake's bound,
    /// whichever side started it.
    static func closeAfterGrace(_ channel: Channel) {
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }
}

/// Sits before the frame aggregator (which drops the mask bit of frames it reassembles) and
/// enforces RFC 6455 §5.1: a server closes with 1002 on an unmasked frame from its client, a
/// client on a masked frame from its server. After that, nothing more is read.
final class MaskingRule: ChannelInboundHandler, Sendable {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let bridge: WebSocketBridge
    private let violated = NIOLockedValueBox(false)

    init(bridge: WebSocketBridge) { self.bridge = bridge }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !violated.withLockedValue({ $0 }) else { return }
        let frame = unwrapInboundIn(data)
        let masked = frame.maskKey != nil
        switch (bridge.role, masked) {
        case (.server, false):
            refuse(context, "a client's frames must be masked (RFC 6455 section 5.1)")
        case (.client, true):
            refuse(context, "a server's frames must not be masked (RFC 6455 section 5.1)")
        default:
            context.fireChannelRead(data)
        }
    }

    private func refuse(_ context: ChannelHandlerContext, _ reason: String) {
        violated.withLockedValue { $0 = true }
        bridge.initiateClose(channel: context.channel, code: 1002, reason: reason)
    }
}
