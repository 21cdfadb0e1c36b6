import HTTPDNS
import NIOCore
import NIOHTTP1

/// HTTP/1.1 exchanges on one connection: collects each request within the body limit, asks the service, writes
/// the answer. Answers found at once are flushed at the end of the read burst (pipelined requests leave together).
///
/// Requests are answered one at a time from a queue, never from inside the write of the previous answer (NIO's
/// pipelining handler hands the next pipelined request over during that write, which would nest one call per queued
/// request), and only while the channel is writable: a client that sends without reading gets no further answers
/// written, and its connection's ``ConnectionGuard`` stops reading from it.
final class HTTP1ServiceHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private struct Request {
        var head: HTTPRequestHead
        var body: [UInt8]
        var tooLarge: Bool
    }

    private let exchange: Exchange
    /// The connection's deadlines, told of each request's progress.
    private let connectionGuard: ConnectionGuard
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    /// Complete requests waiting for their turn, from ``nextReady`` on.
    private var ready: [Request] = []
    private var nextReady = 0
    /// An answer is being looked up; the next request waits for it (answers leave in request order).
    private var awaitingAnswer = false
    /// The queue is being worked through (a request handed over meanwhile only joins the queue).
    private var draining = false
    /// The connection went away while the service was answering: the answer is dropped.
    private var removed = false
    /// The wait of the request whose answer comes from an upstream: cancelled when the connection goes away.
    private var upstreamWait: UpstreamWait?
    /// Answers were written during this read burst and wait for its end to be flushed.
    private var needsFlush = false

    init(_ exchange: Exchange, connectionGuard: ConnectionGuard) {
        self.exchange = exchange
        self.connectionGuard = connectionGuard
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
            connectionGuard.record(.head(1))
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
            connectionGuard.record(.complete(1))
            ready.append(Request(head: head, body: body, tooLarge: tooLarge))
            body = []
            drain(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            drain(context: context)
            if needsFlush {
                needsFlush = false
                context.flush()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        upstreamWait?.cancel()
        upstreamWait = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        removed = true
        upstreamWait?.cancel()
        upstreamWait = nil
        context.fireChannelInactive()
    }

    /// Answers queued requests in order while nothing is being looked up and the channel takes more.
    private func drain(context: ChannelHandlerContext) {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !awaitingAnswer, !removed, context.channel.isWritable, nextReady < ready.count {
            let request = ready[nextReady]
            nextReady += 1
            if nextReady == ready.count {
                ready.removeAll(keepingCapacity: true)
                nextReady = 0
            }
            answer(request, context: context)
        }
    }

    private func answer(_ request: Request, context: ChannelHandlerContext) {
        let head = request.head
        if request.tooLarge {
            write(
                context: context, head: head,
                .text(413, "the request body is larger than \(exchange.limits.maximumBodyBytes) bytes"))
            needsFlush = true
            return
        }
        if let origin = exchange.adminOrigin {
            if !origin.allows(host: head.headers.first(name: "host")) {
                write(context: context, head: head, .text(421, "this listener does not answer for that Host"))
                needsFlush = true
                return
            }
            // The endpoint as the service will route it (`/stats.json/` and `//stats.json` are `/stats.json`).
            let endpoint = HTTPDNSService.endpoint(RequestTarget(head.uri).segments)
            if endpoint == "stats.json" || endpoint == "admin/status",
                !AdminOrigin.allowsStats(fetchSite: head.headers.first(name: "sec-fetch-site"))
            {
                write(context: context, head: head, .text(403, "this endpoint is not for other sites' pages"))
                needsFlush = true
                return
            }
            if !AdminOrigin.allowsControl(
                method: head.method.rawValue, origin: head.headers.first(name: "origin"),
                fetchSite: head.headers.first(name: "sec-fetch-site"),
                control: head.headers.first(name: AdminOrigin.controlHeader))
            {
                write(
                    context: context, head: head,
                    .text(403, "control calls need the header Hostsctl-Control: 1 and are not taken from web pages"))
                needsFlush = true
                return
            }
        }
        // HEAD is answered as GET without the body.
        let method = head.method == .HEAD ? "GET" : head.method.rawValue
        var serviceRequest = ServiceRequest(
            method: method, target: head.uri, contentType: head.headers.first(name: "content-type"),
            body: request.body, client: exchange.client)
        let forwardedFor = head.headers["x-forwarded-for"]
        if !forwardedFor.isEmpty { serviceRequest.forwardedFor = forwardedFor.joined(separator: ",") }
        let forwarded = head.headers["forwarded"]
        if !forwarded.isEmpty { serviceRequest.forwarded = forwarded.joined(separator: ",") }
        let later = { [self] in
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            return NIOLoopBound<(ServiceResponse) -> Void>(
                { response in
                    let (handler, context) = bound.value
                    handler.awaitingAnswer = false
                    handler.upstreamWait = nil
                    guard !handler.removed else { return }
                    handler.write(context: context, head: head, response)
                    context.flush()
                    handler.drain(context: context)
                }, eventLoop: context.eventLoop)
        }
        awaitingAnswer = true
        if let response = exchange.answer(
            serviceRequest, on: context.eventLoop, later: later, waiting: { upstreamWait = $0 })
        {
            awaitingAnswer = false
            write(context: context, head: head, response)
            needsFlush = true
        }
    }

    private func write(context: ChannelHandlerContext, head: HTTPRequestHead, _ response: ServiceResponse) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: "\(response.body.count)")
        for (name, value) in response.allHeaders.sorted(by: { $0.key < $1.key }) {
            headers.add(name: name, value: value)
        }
        // After a refused body the rest of it may still be on its way: the connection ends with the answer.
        let keepAlive = head.isKeepAlive && response.status != 413
        if !keepAlive { headers.add(name: "connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        if head.method != .HEAD, !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        connectionGuard.record(.answered)
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
