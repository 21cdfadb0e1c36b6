import HTTPDNS
import HTTPDNSHTTP2
import Logging
import NIOCore

/// HTTP/2 on nghttp2 (`HTTP2ServerSession`), behind NIOSSL: the decrypted bytes of a read burst go to the session,
/// requests come back as they complete and are answered at once when the cache or a local layer knows the answer,
/// and everything the session has to send then leaves in one write at the end of the burst, so the answers to many
/// streams share TLS records and system calls. Answers that wait for an upstream leave together too, once per batch
/// of the event loop's tasks (see ``LateAnswerFlushing``).
///
/// While the channel is not writable, complete requests wait unanswered (the connection guard also stops reading);
/// their streams stay open, so the concurrent-stream limit bounds them. A stream that closes while its answer waits
/// for an upstream cancels that wait (and the lookups nobody else shares). Streams that end before their answer,
/// whoever reset them (the client, or the session itself over a frame the client made invalid: "MadeYouReset",
/// CVE-2025-8671, which nghttp2 1.52 does not count towards its reset limit), draw on an allowance of
/// ``AbortAllowance/burst`` refilled at ``AbortAllowance/perSecond``; past it the connection gets GOAWAY and is
/// closed. On server shutdown
/// (``ServerDrainingEvent``) a GOAWAY tells the client to open no more streams; the open ones are answered, then
/// the connection closes.
final class HTTP2ServiceHandler: ChannelInboundHandler, HTTP2ServerSessionDelegate, LateAnswerFlushing {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let exchange: Exchange
    /// The connection's deadlines, told of each request's progress.
    private let connectionGuard: ConnectionGuard
    private let settings: HTTP2ServerSession.Settings
    private let options: HTTP2SessionOptions
    private var session: HTTP2ServerSession?
    private var context: ChannelHandlerContext?
    /// Complete requests waiting for the channel to take more (back-pressure), in order.
    private var held: [(Int32, HTTP2Request)] = []
    /// Streams whose answer waits for an upstream, with the wait; a stream that closes leaves the table, its wait
    /// is cancelled and its answer dropped.
    private var answering: [Int32: UpstreamWait?] = [:]
    /// Streams that may still end unanswered before the connection is closed.
    private var aborts = AbortAllowance()
    /// Set inside the session's callbacks when the allowance ran out: the connection ends after the read.
    private var abusive = false
    /// Inside a read burst: output waits for its end.
    private var reading = false
    private var closing = false
    var lateFlushQueued = false

    init(
        _ exchange: Exchange, connectionGuard: ConnectionGuard, settings: HTTP2ServerSession.Settings,
        options: HTTP2SessionOptions
    ) {
        self.exchange = exchange
        self.connectionGuard = connectionGuard
        self.settings = settings
        self.options = options
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        connectionGuard.record(.http2)
        do {
            session = try HTTP2ServerSession(settings: settings, options: options, delegate: self)
        } catch {
            exchange.logger.error("cannot start an HTTP/2 session", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        // A connection that reaches HTTP/2 after shutdown began missed the drain event: GOAWAY at once.
        if exchange.service.isDraining { session?.goAway() }
        // The server's SETTINGS go first, without waiting for the client's preface.
        if context.channel.isActive { sendPending(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendPending(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        session = nil
        held = []
        for case let wait? in answering.values { wait.cancel() }
        answering = [:]
    }

    func channelInactive(context: ChannelHandlerContext) {
        for case let wait? in answering.values { wait.cancel() }
        answering = [:]
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closing else { return }
        reading = true
        do {
            try session.receive(unwrapInboundIn(data))
        } catch {
            exchange.logger.debug("HTTP/2 session failed", metadata: ["error": "\(error)"])
            reading = false
            finish(context: context)
            return
        }
        if abusive {
            reading = false
            closeAbusive(context: context)
        }
    }

    /// Ends a connection whose streams kept ending unanswered: GOAWAY, then closed. (nghttp2 reports a stream it
    /// reset itself as closed only once its RST_STREAM is sent, so this is looked at after reads and after writes.)
    private func closeAbusive(context: ChannelHandlerContext) {
        guard !closing, let session else { return }
        exchange.logger.notice(
            "closing an HTTP/2 connection whose streams keep ending unanswered",
            metadata: ["client": "\(exchange.service.clientText(exchange.client))"])
        session.goAway()
        finish(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        sendPending(context: context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, !held.isEmpty {
            while context.channel.isWritable, !held.isEmpty {
                let (stream, request) = held.removeFirst()
                answer(stream, request, context: context)
            }
            sendPending(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ServerDrainingEvent, let session {
            session.goAway()
            sendPending(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        exchange.logger.debug("HTTP/2 connection error", metadata: ["error": "\(error)"])
        context.fireErrorCaught(error)
    }

    // MARK: HTTP2ServerSessionDelegate

    func requestHeadReceived(stream: Int32) {
        connectionGuard.record(.head(UInt32(stream)))
    }

    func requestReceived(stream: Int32, _ request: HTTP2Request) {
        guard let context else { return }
        connectionGuard.record(.complete(UInt32(stream)))
        if context.channel.isWritable {
            answer(stream, request, context: context)
        } else {
            held.append((stream, request))
        }
    }

    func requestBodyTooLarge(stream: Int32) {
        connectionGuard.record(.complete(UInt32(stream)))
        respond(
            stream, .text(413, "the request body is larger than \(exchange.limits.maximumBodyBytes) bytes"),
            withoutBody: false)
    }

    func sessionError(_ message: String) {
        exchange.logger.debug("HTTP/2 client error", metadata: ["error": "\(message)"])
    }

    func streamClosed(stream: Int32, receiving: Bool) {
        if receiving { connectionGuard.record(.abandoned(UInt32(stream))) }
        var dropped = false
        if let wait = answering.removeValue(forKey: stream) {
            wait?.cancel()
            dropped = true
        }
        if let index = held.firstIndex(where: { $0.0 == stream }) {
            held.remove(at: index)
            dropped = true
        }
        if dropped { connectionGuard.record(.answered) }
        if (receiving || dropped) && !aborts.take(now: .now()) { abusive = true }
    }

    // MARK: Answers

    private func answer(_ stream: Int32, _ request: HTTP2Request, context: ChannelHandlerContext) {
        // HEAD is answered as GET without the body.
        let isHead = request.method == "HEAD"
        var serviceRequest = ServiceRequest(
            method: isHead ? "GET" : request.method, target: request.path, contentType: request.contentType,
            body: request.body, client: exchange.client)
        serviceRequest.forwardedFor = request.forwardedFor
        serviceRequest.forwarded = request.forwarded
        let later = { [self] in
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            return NIOLoopBound<(ServiceResponse) -> Void>(
                { response in
                    let handler = bound.value
                    guard let context = handler.context, handler.answering.removeValue(forKey: stream) != nil else {
                        return
                    }
                    handler.respond(stream, response, withoutBody: isHead)
                    if !handler.reading { handler.flushAfterLoopTasks(context: context) }
                }, eventLoop: context.eventLoop)
        }
        var wait: UpstreamWait?
        if let response = exchange.answer(serviceRequest, on: context.eventLoop, later: later, waiting: { wait = $0 }) {
            respond(stream, response, withoutBody: isHead)
        } else {
            // The answer comes on this event loop in a later turn, never before this returns.
            answering[stream] = .some(wait)
        }
    }

    private func respond(_ stream: Int32, _ response: ServiceResponse, withoutBody: Bool) {
        connectionGuard.record(.answered)
        session?.respond(
            stream: stream, status: response.status, contentType: response.contentType, maxAge: response.maxAge,
            headers: response.headers,
            body: response.body, withoutBody: withoutBody)
    }

    func flushLateAnswers(context: ChannelHandlerContext) {
        // The handler may have been removed since the flush was queued; a read burst since then may have sent
        // everything already, and `sendPending` then writes nothing.
        guard self.context != nil else { return }
        sendPending(context: context)
    }

    /// Writes and flushes what the session has to send, in one buffer; closes the connection when the session is over.
    private func sendPending(context: ChannelHandlerContext) {
        guard let session else { return }
        var buffer = context.channel.allocator.buffer(capacity: 0)
        do {
            try session.pendingOutput(into: &buffer)
        } catch {
            exchange.logger.debug("HTTP/2 session failed", metadata: ["error": "\(error)"])
            finish(context: context)
            return
        }
        if buffer.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
        if abusive {
            closeAbusive(context: context)
        } else if session.isFinished {
            finish(context: context)
        }
    }

    /// Sends what is left (a GOAWAY) and closes once it is written.
    private func finish(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        var buffer = context.channel.allocator.buffer(capacity: 0)
        try? session?.pendingOutput(into: &buffer)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in bound.value.close(promise: nil) }
    }
}

/// How many streams of one connection may end before their answer: a token bucket of ``burst`` streams refilled at
/// ``perSecond`` (nghttp2's own reset limit has the same shape, but counts only the client's RST_STREAM frames).
struct AbortAllowance {
    static let burst = 1_000.0
    static let perSecond = 33.0
    private var tokens = Self.burst
    private var last: NIODeadline?

    /// Takes one; `false` when none is left.
    mutating func take(now: NIODeadline) -> Bool {
        if let last {
            let seconds = Double((now - last).nanoseconds) / 1e9
            tokens = min(Self.burst, tokens + seconds * Self.perSecond)
        }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Sent through every open connection's pipeline when the server begins to shut down: HTTP/2 connections send
/// GOAWAY and close once their open streams are answered.
struct ServerDrainingEvent: Sendable {}
