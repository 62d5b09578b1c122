import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket

/// The last handler of an upgraded pipeline: hands text and binary messages (already
/// reassembled by `NIOWebSocketFrameAggregator`) to an `AsyncStream`, answers pings, and
/// runs the closing handshake.
final class WebSocketBridge: ChannelInboundHandler, Sendable {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let continuation: AsyncStream<WebSocketMessage>.Continuation
    private struct State {
        var closeSent = false
        var closeReason: CloseReason?
        /// When the last frame of any kind (a pong included) arrived: the heartbeat's evidence.
        var lastInbound = NIODeadline.now()
    }
    private let state = NIOLockedValueBox(State())

    init(continuation: AsyncStream<WebSocketMessage>.Continuation) {
        self.continuation = continuation
    }

    var closeReason: CloseReason? { state.withLockedValue { $0.closeReason } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        state.withLockedValue { $0.lastInbound = .now() }
        switch frame.opcode {
        case .text:
            continuation.yield(.text(Array(buffer: frame.unmaskedData)))
        case .binary:
            continuation.yield(.binary(Array(buffer: frame.unmaskedData)))
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readInteger(as: UInt16.self) ?? 1005
            let reason = data.readString(length: data.readableBytes) ?? ""
            let mustAnswer = state.withLockedValue { s -> Bool in
                if s.closeReason == nil { s.closeReason = CloseReason(code: code, reason: reason) }
                defer { s.closeSent = true }
                return !s.closeSent
            }
            continuation.finish()
            if mustAnswer {
                var echo = context.channel.allocator.buffer(capacity: 2)
                echo.writeInteger(code == 1005 ? 1000 : code)
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: echo)))
                    .whenComplete { _ in context.close(promise: nil) }
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
        continuation.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A frame over the size limit, or a malformed one: NIO's error handler has already
        // answered with a close frame; record why and drop the connection.
        state.withLockedValue { s in
            if s.closeReason == nil {
                let code: UInt16 = (error as? NIOWebSocketError) == .invalidFrameLength ? 1009 : 1002
                s.closeReason = CloseReason(code: code, reason: "\(error)")
            }
        }
        continuation.finish()
        context.close(promise: nil)
    }

    /// Pings the peer every `interval`; closes the connection (1001) when nothing at all has
    /// arrived for two intervals, so a peer that vanished without a FIN is noticed.
    func startHeartbeat(channel: Channel, interval: TimeAmount) {
        let task = channel.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [self] task in
            let silent = NIODeadline.now() - state.withLockedValue { $0.lastInbound }
            if silent > interval * 2 {
                task.cancel()
                initiateClose(channel: channel, code: 1001, reason: "no answer to heartbeat for \(silent.nanoseconds / 1_000_000) ms")
                return
            }
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .ping, data: channel.allocator.buffer(capacity: 0)), promise: nil)
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
        guard first else { return }
        var data = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code)
        data.writeString(String(reason.prefix(120)))
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: data), promise: nil)
        // The peer should answer and close; don't wait for ever if it does not.
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }
}
