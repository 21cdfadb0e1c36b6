import HTTPDNS
import NIOCore
import NIOHTTP1

/// HTTP/1.1 exchanges on one connection: collects each request within the body limit, asks the service, writes
/// the answer. Answers found at once are flushed at the end of the read burst (pipelined requests leave together).
final class HTTP1ServiceHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let exchange: Exchange
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    /// The connection went away while the service was answering: the answer is dropped.
    private var removed = false
    /// Answers were written during this read burst and wait for its end to be flushed.
    private var needsFlush = false

    init(_ exchange: Exchange) {
        self.exchange = exchange
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
        case .body(var buffer):
            guard !tooLarge else { return }
            if body.count + buffer.readableBytes > exchange.limits.maximumBodyBytes {
                tooLarge = true
                body = []
            } else {
                body += buffer.readBytes(length: buffer.readableBytes) ?? []
            }
        case .end:
            guard let head else { return }
            self.head = nil
            if tooLarge {
                write(
                    context: context, head: head,
                    .text(413, "the request body is larger than \(exchange.limits.maximumBodyBytes) bytes"))
                context.flush()
                return
            }
            let request = ServiceRequest(
                method: head.method.rawValue, target: head.uri, contentType: head.headers.first(name: "content-type"),
                body: body, client: exchange.client)
            body = []
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let later = NIOLoopBound<(ServiceResponse) -> Void>(
                { response in
                    let (handler, context) = bound.value
                    guard !handler.removed else { return }
                    handler.write(context: context, head: head, response)
                    context.flush()
                }, eventLoop: context.eventLoop)
            if let response = exchange.answer(request, on: context.eventLoop, later: later) {
                write(context: context, head: head, response)
                needsFlush = true
            }
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

    private func write(context: ChannelHandlerContext, head: HTTPRequestHead, _ response: ServiceResponse) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: "\(response.body.count)")
        for (name, value) in response.headers.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        // After a refused body the rest of it may still be on its way: the connection ends with the answer.
        let keepAlive = head.isKeepAlive && response.status != 413
        if !keepAlive { headers.add(name: "connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        if keepAlive {
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            let channel = context.channel
            let done = context.eventLoop.makePromise(of: Void.self)
            context.write(wrapOutboundOut(.end(nil)), promise: done)
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
