import AsyncHTTPClient
import Foundation
import Logging
import HTTPDNS
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOTLS
import Synchronization
import HTTPDNSPinnedClients

/// The request a connection race was run for, sent on the connection the race won instead of dialling the winner a
/// second time.
///
/// AsyncHTTPClient cannot take a connected channel, so this is the one exchange the pinned transport runs itself: TLS
/// (for https) with the real host's name for SNI and the certificate check, never the address; HTTP/1.1 (offered
/// alone in ALPN); one request; the connection closes when its answer has ended. Every later request to the address
/// goes through its pinned client. The exchange keeps the pinned clients' rules: the request's deadline covers the
/// whole answer, the response body streams with back-pressure (the socket is not read while the reader is behind),
/// 1xx answers are skipped, and header sizes are bounded by the decoder.
struct RacedExchange: Sendable {
    /// The request head (with `Host` and the body's length) and its body.
    var head: HTTPRequestHead
    var body: ByteBuffer?
    /// The real host, for SNI and the certificate check; `nil` for plain http.
    var tlsHost: String?

    /// The exchange for a request to `url`, or `nil` when the connection cannot carry it (a host that is an address
    /// literal, whose certificate check is not this path's business).
    init?(method: HTTPMethod, url: URL, headers: HTTPHeaders, body: ByteBuffer?) {
        guard let host = RequestRewriting.host(of: url), let hostHeader = RequestRewriting.hostHeader(for: url),
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return nil }
        let isTLS = url.scheme?.lowercased() == "https"
        if isTLS, IPAddress(host) != nil { return nil }
        var headers = headers
        if !headers.contains(name: "Host") { headers.add(name: "Host", value: hostHeader) }
        // The length is the body's own; a framing header from the caller could contradict it.
        headers.remove(name: "Content-Length")
        headers.remove(name: "Transfer-Encoding")
        if let body {
            headers.add(name: "Content-Length", value: String(body.readableBytes))
        } else if [.POST, .PUT, .PATCH].contains(method) {
            headers.add(name: "Content-Length", value: "0")
        }
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        self.head = HTTPRequestHead(version: .http1_1, method: method, uri: target, headers: headers)
        self.body = body
        self.tlsHost = isTLS ? host : nil
    }

    /// The server answered with an HTTP/2 connection preface: it speaks only HTTP/2 and went on without ALPN (as
    /// some do when the client offers only `http/1.1`). It cannot have taken the HTTP/1.1 request for one, so the
    /// request counts as not sent and goes through the pinned client, which negotiates HTTP/2.
    struct SpeaksOnlyHTTP2: Error, CustomStringConvertible {
        var description: String { "the server speaks only HTTP/2" }
    }

    /// The answer's head, the time to it from the start of the exchange, and the body as it arrives.
    struct Answer: Sendable {
        var head: HTTPResponseHead
        var headLatency: Duration
        var body: Body
    }

    /// A response body read off the connection with back-pressure.
    typealias Body = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, BodyDemand
    >

    /// Sends the exchange on `channel` (connected, nothing in its pipeline) and returns at the response head.
    /// - Parameters:
    ///   - tls: The client TLS context (verification on, ALPN `http/1.1`); required when ``tlsHost`` is set (the
    ///     pinned transport always passes it then).
    ///   - handshakeTimeout: How long the TLS handshake may take (the pinned clients' connect timeout); a handshake
    ///     that outlasts it fails as a connect failure, before anything was sent.
    /// - Throws: ``PinnedTransport/AttemptFailure`` around the NIO, NIOSSL or HTTP error, saying whether the request
    ///   had gone out.
    func send(
        on channel: any Channel, tls: NIOSSLContext?, handshakeTimeout: Duration, deadline: NIODeadline
    ) async throws -> Answer {
        let exchange = self
        let answer = channel.eventLoop.flatSubmit { () -> EventLoopFuture<Answer> in
            let promise = channel.eventLoop.makePromise(of: Answer.self)
            let handler = RacedExchangeHandler(
                exchange: exchange, answer: promise,
                handshakeDeadline: min(deadline, .now() + TimeAmount(handshakeTimeout)), deadline: deadline)
            do {
                let pipeline = channel.pipeline.syncOperations
                if let host = exchange.tlsHost {
                    guard let tls else { throw NIOSSLExtraError.invalidSNIHostname }
                    try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: host))
                }
                try pipeline.addHandler(HTTP2PrefaceSniffer())
                try pipeline.addHandler(HTTPRequestEncoder())
                try pipeline.addHandler(
                    ByteToMessageHandler(
                        HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .drop)))
                try pipeline.addHandler(handler)
            } catch {
                channel.close(promise: nil)
                promise.fail(PinnedTransport.AttemptFailure(underlying: error, requestSent: false))
            }
            return promise.futureResult
        }
        return try await withTaskCancellationHandler {
            try await answer.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }

    /// Asks the connection for more of the body when the reader has caught up, and closes it when the reader went
    /// away before the end.
    struct BodyDemand: NIOAsyncSequenceProducerDelegate {
        let handler: NIOLoopBound<RacedExchangeHandler>

        func produceMore() {
            let handler = self.handler
            handler.eventLoop.execute { handler.value.resumeReading() }
        }

        func didTerminate() {
            let handler = self.handler
            handler.eventLoop.execute { handler.value.readerLeft() }
        }
    }
}

/// Runs one ``RacedExchange`` on its connection's event loop: writes the request (after the TLS handshake, so a
/// failed handshake sent nothing), hands the head and a back-pressured body to the caller, holds the exchange to its
/// deadline, and closes the connection at the end.
final class RacedExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private enum Phase {
        case connecting
        case sent(ContinuousClock.Instant)
        case streaming(RacedExchange.Body.Source)
        case done
    }

    private let exchange: RacedExchange
    private let answer: EventLoopPromise<RacedExchange.Answer>
    private let handshakeDeadline: NIODeadline
    private let deadline: NIODeadline
    private var phase = Phase.connecting
    private var context: ChannelHandlerContext?
    private var timer: Scheduled<Void>?
    /// The reader is behind: reads wait in ``pendingRead`` until it asks for more.
    private var paused = false
    private var pendingRead = false

    init(
        exchange: RacedExchange, answer: EventLoopPromise<RacedExchange.Answer>, handshakeDeadline: NIODeadline,
        deadline: NIODeadline
    ) {
        self.exchange = exchange
        self.answer = answer
        self.handshakeDeadline = handshakeDeadline
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard context.channel.isActive else {
            // The server closed the connection between the race and now: nothing was sent.
            fail(HTTPClientError.remoteConnectionClosed)
            return
        }
        if exchange.tlsHost == nil {
            sendRequest(context: context)
        } else {
            // The request goes out once the handshake completed, which must happen within the connect timeout.
            arm(at: handshakeDeadline, failing: HTTPClientError.tlsHandshakeTimeout, context: context)
        }
    }

    /// Ends the exchange with `error` at `deadline` unless it ended or moved on before.
    private func arm(at deadline: NIODeadline, failing error: any Error & Sendable, context: ChannelHandlerContext) {
        timer?.cancel()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) { loopBound.value.fail(error) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent, case .connecting = phase {
            sendRequest(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func sendRequest(context: ChannelHandlerContext) {
        phase = .sent(.now)
        arm(at: deadline, failing: ExchangeDeadline.Exceeded(), context: context)
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        if let body = exchange.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (unwrapInboundIn(data), phase) {
        case (.head(let head), .sent(let started)):
            let body = RacedExchange.Body.makeSequence(
                backPressureStrategy: .init(lowWatermark: 2, highWatermark: 16), finishOnDeinit: false,
                delegate: RacedExchange.BodyDemand(handler: NIOLoopBound(self, eventLoop: context.eventLoop)))
            phase = .streaming(body.source)
            answer.succeed(.init(head: head, headLatency: .now - started, body: body.sequence))
        case (.body(let part), .streaming(let source)):
            switch source.yield(part) {
            case .produceMore: break
            case .stopProducing: paused = true
            case .dropped: readerLeft()
            }
        case (.end, .streaming(let source)):
            finish()
            source.finish()
        default:
            // Anything else ends the exchange: an answer before the request went out, or bytes after the end (which
            // is ignored, the exchange being over).
            fail(HTTPParserError.invalidInternalState)
        }
    }

    func read(context: ChannelHandlerContext) {
        if paused {
            pendingRead = true
        } else {
            context.read()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(HTTPClientError.remoteConnectionClosed)
        context.fireChannelInactive()
    }

    /// The reader wants more: a read held back goes out.
    func resumeReading() {
        paused = false
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }

    /// The reader dropped the body before its end: the exchange ends and the connection closes.
    func readerLeft() {
        guard case .streaming = phase else { return }
        finish()
    }

    /// Ends the exchange with `error`: the caller waiting for the head, or the body's reader, sees it.
    private func fail(_ error: any Error) {
        switch phase {
        case .connecting:
            answer.fail(PinnedTransport.AttemptFailure(underlying: error, requestSent: false))
        case .sent:
            let understood = !(error is RacedExchange.SpeaksOnlyHTTP2)
            answer.fail(PinnedTransport.AttemptFailure(underlying: error, requestSent: understood))
        case .streaming(let source):
            source.finish(error)
        case .done:
            return
        }
        finish()
    }

    /// The exchange is over: the timer stops and the connection closes (it carries one exchange only).
    private func finish() {
        phase = .done
        timer?.cancel()
        timer = nil
        context?.close(promise: nil)
    }
}

/// Tells an HTTP/2 server's first bytes (a frame header, whose length starts with a zero byte, with SETTINGS as its
/// type) from an HTTP/1.1 answer (`HTTP/…`) before the response decoder sees them, and fails the exchange with
/// ``RacedExchange/SpeaksOnlyHTTP2`` for the former. Only the first read is looked at.
final class HTTP2PrefaceSniffer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var checked = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !checked {
            checked = true
            let bytes = unwrapInboundIn(data)
            let start = bytes.readerIndex
            if bytes.getInteger(at: start, as: UInt8.self) == 0,
                bytes.readableBytes < 4 || bytes.getInteger(at: start + 3, as: UInt8.self) == 0x04
            {
                context.fireErrorCaught(RacedExchange.SpeaksOnlyHTTP2())
                return
            }
        }
        context.fireChannelRead(data)
    }
}

// MARK: - The race's connection in the pinned transport

extension PinnedTransport {
    /// `request` as the race's connection sends it; `nil` when that connection cannot carry it: AsyncHTTPClient's
    /// request body cannot be read back, so only a request without one (the URL protocol's bodies come as bytes).
    static func raced(_ request: HTTPClientRequest) -> RacedExchange? {
        guard request.body == nil, let url = URL(string: request.url) else { return nil }
        return RacedExchange(method: request.method, url: url, headers: request.headers, body: nil)
    }

    /// `exchange` as the race's connection sends it; `nil` when that connection cannot carry it.
    static func raced(_ exchange: Exchange) -> RacedExchange? {
        RacedExchange(
            method: exchange.request.method, url: exchange.parsedURL, headers: exchange.request.headers,
            body: exchange.body)
    }

    /// Sends `raced` on the connection the race won, and returns at the response head. `nil` when the connection
    /// was gone or could not carry the request (the server closed it meanwhile, TLS did not agree on HTTP/1.1, or the
    /// server answered with an HTTP/2 preface): the caller then sends through the pinned client, which dials again
    /// (and negotiates HTTP/2 where the server wants it). A rejected
    /// certificate, a handshake that timed out, or a failure after sending is thrown as it is.
    func send(
        _ raced: RacedExchange, on connection: DialedConnection, deadline: NIODeadline
    ) async throws -> RacedExchange.Answer? {
        guard let channel = connection.take() else { return nil }
        do {
            let tls = raced.tlsHost == nil ? nil : try await racedTLSContext()
            return try await raced.send(
                on: channel, tls: tls, handshakeTimeout: profile.connectTimeout, deadline: deadline)
        } catch let failure as AttemptFailure where !failure.requestSent && !Task.isCancelled {
            let (code, _, _) = Self.classify(failure)
            guard code != .certificateRejected, code != .timeout else { throw failure }
            logger.debug(
                "the race's connection could not carry the request; dialling again",
                metadata: ["host": "\(raced.tlsHost ?? "-")", "error": "\(code)"])
            return nil
        }
    }

    /// The TLS context of the race's connections: the pinned clients' verification and trust roots, ALPN
    /// `http/1.1` only. Made once, on first use, on the cooperative pool: it reads the trust-root files, and the URL
    /// protocol's loads run on event loops, which must not wait for files.
    private func racedTLSContext() async throws -> NIOSSLContext {
        if let made = racedTLS.withLock({ $0 }) { return made }
        return try await withTaskExecutorPreference(globalConcurrentExecutor) { try makeRacedTLSContext() }
    }

    private func makeRacedTLSContext() throws -> NIOSSLContext {
        try racedTLS.withLock { context in
            if let context { return context }
            var tls = try TLSConfiguration.verifiedClient(additionalTrustRoots: profile.trustRoots)
            tls.applicationProtocols = ["http/1.1"]
            let made = try NIOSSLContext(configuration: tls)
            context = made
            return made
        }
    }
}
