import HTTPDNS
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2

/// HTTP/2 exchanges at the frame level on the connection's own pipeline, behind `NIOHTTP2Handler` (which keeps the
/// connection's and streams' state, SETTINGS and PING): no child channel and no HTTP/1 translation per stream,
/// because a DNS exchange is one small request and one small answer. Answers found at once are flushed at the end of
/// the read burst, so the answers to many streams leave in few TLS records and system calls.
///
/// Without a stream multiplexer nothing else gives the client its flow-control window back: the handler sends a
/// connection-level WINDOW_UPDATE for the DATA it consumed at the end of each read burst (a stream's own window,
/// 65,535 bytes, already covers the largest body taken). While the channel is not writable, complete requests wait
/// unanswered; their streams stay open, so the concurrent-stream limit bounds them.
final class HTTP2ServiceHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// A request whose body is still arriving.
    private struct Pending {
        var method: String
        var target: String
        var contentType: String?
        var body: [UInt8] = []
        var tooLarge = false
    }

    private let exchange: Exchange
    /// The connection's deadlines, told of each request's progress.
    private let connectionGuard: ConnectionGuard
    /// Requests still being received, by stream (at most the advertised concurrent-stream limit).
    private var receiving: [HTTP2StreamID: Pending] = [:]
    /// Complete requests waiting for the channel to take more (back-pressure), in order.
    private var held: [(HTTP2StreamID, Pending)] = []
    /// Streams whose answer waits for an upstream; a stream that closes leaves the set and its answer is dropped.
    private var answering: Set<HTTP2StreamID> = []
    private var removed = false
    private var needsFlush = false
    /// Flow-controlled DATA bytes consumed since the last connection WINDOW_UPDATE.
    private var consumed = 0

    init(_ exchange: Exchange, connectionGuard: ConnectionGuard) {
        self.exchange = exchange
        self.connectionGuard = connectionGuard
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionGuard.record(.http2)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let stream = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            if let pending = receiving[stream] {
                // Trailers: their fields are not used, but they may end the request.
                if headers.endStream {
                    receiving[stream] = nil
                    complete(stream, pending, context: context)
                }
                return
            }
            guard !answering.contains(stream), !held.contains(where: { $0.0 == stream }) else { return }
            let fields = headers.headers
            let pending = Pending(
                method: fields.first(name: ":method") ?? "", target: fields.first(name: ":path") ?? "/",
                contentType: fields.first(name: "content-type"))
            if headers.endStream {
                complete(stream, pending, context: context)
            } else {
                receiving[stream] = pending
                connectionGuard.record(.head(UInt32(Int(stream))))
            }
        case .data(let payload):
            consumed += payload.data.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0)
            guard var pending = receiving[stream] else { return }
            if case .byteBuffer(var buffer) = payload.data, !pending.tooLarge {
                if pending.body.count + buffer.readableBytes > exchange.limits.maximumBodyBytes {
                    pending.tooLarge = true
                    pending.body = []
                } else {
                    pending.body += buffer.readBytes(length: buffer.readableBytes) ?? []
                }
            }
            if pending.tooLarge {
                // Refused at once. If the client is still sending, the rest of the body is not wanted: RST_STREAM
                // NO_ERROR after the answer (RFC 9113 §8.1).
                receiving[stream] = nil
                connectionGuard.record(.complete(UInt32(Int(stream))))
                write(
                    stream, .text(413, "the request body is larger than \(exchange.limits.maximumBodyBytes) bytes"),
                    context: context)
                if !payload.endStream {
                    context.write(
                        wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .rstStream(.noError))), promise: nil)
                }
                needsFlush = true
            } else if payload.endStream {
                receiving[stream] = nil
                complete(stream, pending, context: context)
            } else {
                receiving[stream] = pending
            }
        case .rstStream:
            forget(stream, context: context)
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Streams NIOHTTP2Handler closes itself (a stream error, a reset in either direction) end here too.
        if let closed = event as? StreamClosedEvent { forget(closed.streamID, context: context) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if consumed > 0 {
            let increment = consumed
            consumed = 0
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
                promise: nil)
            needsFlush = true
        }
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, !held.isEmpty {
            while context.channel.isWritable, !held.isEmpty {
                let (stream, pending) = held.removeFirst()
                answer(stream, pending, context: context)
            }
            context.flush()
        }
        context.fireChannelWritabilityChanged()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler has already answered protocol errors (GOAWAY or RST_STREAM); nothing else to do here.
        exchange.logger.debug("HTTP/2 error", metadata: ["error": "\(error)"])
    }

    /// Drops what is kept for `stream`, which closed: a request still arriving is abandoned, an answer not yet
    /// written will not be.
    private func forget(_ stream: HTTP2StreamID, context: ChannelHandlerContext) {
        if receiving.removeValue(forKey: stream) != nil {
            connectionGuard.record(.abandoned(UInt32(Int(stream))))
        }
        var dropped = answering.remove(stream) != nil
        if let index = held.firstIndex(where: { $0.0 == stream }) {
            held.remove(at: index)
            dropped = true
        }
        if dropped { connectionGuard.record(.answered) }
    }

    private func complete(_ stream: HTTP2StreamID, _ pending: Pending, context: ChannelHandlerContext) {
        connectionGuard.record(.complete(UInt32(Int(stream))))
        if context.channel.isWritable {
            answer(stream, pending, context: context)
        } else {
            held.append((stream, pending))
        }
    }

    private func answer(_ stream: HTTP2StreamID, _ pending: Pending, context: ChannelHandlerContext) {
        // HEAD is answered as GET without the body.
        let isHead = pending.method == "HEAD"
        let request = ServiceRequest(
            method: isHead ? "GET" : pending.method, target: pending.target, contentType: pending.contentType,
            body: pending.body, client: exchange.client)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let later = NIOLoopBound<(ServiceResponse) -> Void>(
            { response in
                let (handler, context) = bound.value
                guard !handler.removed, handler.answering.remove(stream) != nil else { return }
                handler.write(stream, response, withoutBody: isHead, context: context)
                context.flush()
            }, eventLoop: context.eventLoop)
        answering.insert(stream)
        if let response = exchange.answer(request, on: context.eventLoop, later: later) {
            answering.remove(stream)
            write(stream, response, withoutBody: isHead, context: context)
            needsFlush = true
        }
    }

    private func write(
        _ stream: HTTP2StreamID, _ response: ServiceResponse, withoutBody: Bool = false,
        context: ChannelHandlerContext
    ) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(4 + response.headers.count)
        headers.add(name: ":status", value: String(response.status))
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.count))
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) {
            headers.add(name: name.lowercased(), value: value)
        }
        connectionGuard.record(.answered)
        let empty = response.body.isEmpty || withoutBody
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers, endStream: empty)))),
            promise: nil)
        guard !empty else { return }
        let buffer = context.channel.allocator.buffer(bytes: response.body)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: stream, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))),
            promise: nil)
    }
}
