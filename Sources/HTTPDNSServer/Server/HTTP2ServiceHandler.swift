import HTTPDNS
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2

/// HTTP/2 exchanges at the frame level on the connection's own pipeline, behind `NIOHTTP2Handler` (which keeps the
/// connection's and streams' state, flow control, SETTINGS and PING): no child channel and no HTTP/1 translation
/// per stream, because a DNS exchange is one small request and one small answer. Answers found at once are flushed
/// at the end of the read burst, so the answers to many streams leave in few TLS records and system calls.
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
    /// Requests still being received, by stream (at most the advertised concurrent-stream limit).
    private var receiving: [HTTP2StreamID: Pending] = [:]
    /// Streams whose answer waits for an upstream; a reset stream leaves the set and its answer is dropped.
    private var answering: Set<HTTP2StreamID> = []
    private var removed = false
    private var needsFlush = false

    init(_ exchange: Exchange) {
        self.exchange = exchange
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
            guard !answering.contains(stream) else { return }
            let fields = headers.headers
            let pending = Pending(
                method: fields.first(name: ":method") ?? "", target: fields.first(name: ":path") ?? "/",
                contentType: fields.first(name: "content-type"))
            if headers.endStream {
                complete(stream, pending, context: context)
            } else {
                receiving[stream] = pending
            }
        case .data(let payload):
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
            receiving[stream] = nil
            answering.remove(stream)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler has already answered protocol errors (GOAWAY or RST_STREAM); nothing else to do here.
        exchange.logger.debug("HTTP/2 error", metadata: ["error": "\(error)"])
    }

    private func complete(_ stream: HTTP2StreamID, _ pending: Pending, context: ChannelHandlerContext) {
        let request = ServiceRequest(
            method: pending.method, target: pending.target, contentType: pending.contentType, body: pending.body,
            client: exchange.client)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let later = NIOLoopBound<(ServiceResponse) -> Void>(
            { response in
                let (handler, context) = bound.value
                guard !handler.removed, handler.answering.remove(stream) != nil else { return }
                handler.write(stream, response, context: context)
                context.flush()
            }, eventLoop: context.eventLoop)
        answering.insert(stream)
        if let response = exchange.answer(request, on: context.eventLoop, later: later) {
            answering.remove(stream)
            write(stream, response, context: context)
            needsFlush = true
        }
    }

    private func write(_ stream: HTTP2StreamID, _ response: ServiceResponse, context: ChannelHandlerContext) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(4 + response.headers.count)
        headers.add(name: ":status", value: String(response.status))
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.count))
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) {
            headers.add(name: name.lowercased(), value: value)
        }
        let empty = response.body.isEmpty
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
