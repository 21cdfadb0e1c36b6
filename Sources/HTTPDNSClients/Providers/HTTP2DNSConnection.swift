import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
import HTTPDNSCore
import HTTPDNSHTTP2

/// One TLS connection with HTTP/2 to an HTTP DNS server, built for many small exchanges at once.
///
/// Every lookup is one HTTP/2 stream on this connection, up to the server's `SETTINGS_MAX_CONCURRENT_STREAMS`
/// (nghttp2 queues streams beyond that until one ends). HTTP/2 is nghttp2's, as in `hostsctl serve`: one handler
/// (``HTTP2DNSStreams``) hands each request to the connection's `HTTP2ClientSession` and the decrypted bytes to it,
/// and gets each answer back by stream ID. What the session has to send after one event-loop tick of requests, or
/// one read burst, goes out in one write, so a burst of lookups shares TLS records.
///
/// The TLS handshake sends the endpoint's host name as SNI and the certificate is checked against it, also when
/// the TCP connection goes to a bootstrap address. ALPN must select `h2`; a server that does not offer it fails the
/// connection with ``HTTP2NotOffered`` and the transport uses HTTP/1.1 for it instead.
///
/// The connection stops taking new streams (``isUsable`` turns false) after a GOAWAY, a connection error, when its
/// stream IDs run out, or after many timed-out streams; the transport then opens a new one. It closes itself after
/// ``HTTPDNSTransport/Configuration/idleConnectionTimeout`` without streams.
final class HTTP2DNSConnection: Sendable {
    /// The channel, for closing.
    let channel: any Channel
    private let streams: NIOLoopBound<HTTP2DNSStreams>
    /// Exchanges handed over from other threads and not yet started, and whether a task to start them is on its way
    /// to the event loop: one task (and one wake-up) carries a whole burst of lookups.
    private let handedOver = Locked<(exchanges: [HTTP2DNSExchange], scheduled: Bool)>(([], false))
    private let health: HTTP2ConnectionHealth
    /// `scheme`, `:authority` and the base path of every request.
    private let authority: String
    private let basePath: String

    private init(
        channel: any Channel, streams: HTTP2DNSStreams, endpoint: HTTPDNSEndpoint, health: HTTP2ConnectionHealth
    ) {
        self.channel = channel
        self.streams = NIOLoopBound(streams, eventLoop: channel.eventLoop)
        self.health = health
        let hostPart = IPAddress(endpoint.host)?.urlHost ?? endpoint.host
        self.authority = endpoint.port == endpoint.scheme.defaultPort ? hostPart : "\(hostPart):\(endpoint.port)"
        self.basePath = endpoint.path
    }

    /// Whether new exchanges may start on this connection.
    var isUsable: Bool { health.usable.load(ordering: .relaxed) && channel.isActive }

    /// The settings sent to the server: no server push, a per-stream window larger than any accepted answer, an
    /// 8 MiB connection window.
    static func localSettings(maximumResponseBytes: Int) -> HTTP2ClientSession.Settings {
        HTTP2ClientSession.Settings(
            initialWindowSize: UInt32(min(maximumResponseBytes + 16_384, Int(Int32.max))), connectionWindow: 8 << 20,
            maximumHeaderListSize: 16_384)
    }

    /// Connects to `address` (or the endpoint's host through the system resolver), completes TLS with ALPN `h2`
    /// for the endpoint's host name, and sets up HTTP/2. The whole of it is bounded by `timeout`.
    static func connect(
        endpoint: HTTPDNSEndpoint,
        address: IPAddress?,
        sslContext: NIOSSLContext,
        group: any EventLoopGroup,
        timeout: Duration,
        idleTimeout: Duration,
        maximumResponseBytes: Int
    ) -> Attempt {
        let eventLoop = group.next()
        let ready = eventLoop.makePromise(of: HTTP2DNSConnection.self)
        let health = HTTP2ConnectionHealth()
        let host = endpoint.host
        let settings = localSettings(maximumResponseBytes: maximumResponseBytes)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(timeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: host)
                    let gate = ALPNGate { channel, protocolName in
                        guard protocolName == "h2" else { throw HTTP2NotOffered(negotiated: protocolName) }
                        let streams = try HTTP2DNSStreams(
                            idleTimeout: TimeAmount(idleTimeout), health: health, settings: settings)
                        let connection = HTTP2DNSConnection(
                            channel: channel, streams: streams, endpoint: endpoint, health: health)
                        // Ready once the server's SETTINGS arrived: before that its stream limit is unknown, and a
                        // first burst of lookups would overrun it.
                        streams.whenReady = { result in ready.completeWith(result.map { connection }) }
                        try channel.pipeline.syncOperations.addHandler(streams)
                    } failed: { error in
                        ready.fail(error)
                    }
                    try channel.pipeline.syncOperations.addHandlers(tls, gate)
                }
            }
        let connected: EventLoopFuture<any Channel>
        if let address {
            do {
                connected = bootstrap.connect(
                    to: try SocketAddress(ipAddress: address.description, port: endpoint.port))
            } catch {
                ready.fail(error)
                return Attempt(ready: ready)
            }
        } else {
            connected = bootstrap.connect(host: endpoint.host, port: endpoint.port)
        }
        // The connect timeout covers TCP only; this one covers TLS and the switch to HTTP/2 too.
        let expiry = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            ready.fail(ChannelError.connectTimeout(TimeAmount(timeout)))
        }
        connected.whenComplete { result in
            switch result {
            case .success(let channel):
                ready.futureResult.whenFailure { _ in channel.close(promise: nil) }
            case .failure(let error):
                ready.fail(error)
            }
        }
        ready.futureResult.whenComplete { _ in expiry.cancel() }
        return Attempt(ready: ready)
    }

    /// A connection being made: its outcome, and a way to give it up before it is made.
    struct Attempt: Sendable {
        fileprivate let ready: EventLoopPromise<HTTP2DNSConnection>

        /// The connection once it is made and the server's settings have arrived, or why it was not.
        var future: EventLoopFuture<HTTP2DNSConnection> { ready.futureResult }

        /// Fails the attempt with `error` at once, unless it has already ended: whoever waits for it is told, and the
        /// channel is closed as soon as there is one (at once when TCP is up; when its connect ends otherwise). A
        /// connection already made is closed.
        func abandon(_ error: any Error) {
            ready.fail(error)
            ready.futureResult.whenSuccess { $0.channel.close(promise: nil) }
        }
    }

    /// Sends one request and returns the whole answer.
    /// - Throws: `HTTPDNSError` (timeout, response too large), ``HTTP2ConnectionLost``, `CancellationError`.
    nonisolated(nonsending) package func execute(
        _ request: HTTPDNSTransport.Request,
        timeout: Duration,
        limit: Int,
        server: String
    ) async throws -> HTTPDNSTransport.Response {
        try Task.checkCancellation()
        let exchange = makeExchange(request, timeout: TimeAmount(timeout), limit: limit, server: server)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                exchange.continuation = continuation
                handOver(exchange)
            }
        } onCancel: {
            cancel(exchange)
        }
    }

    /// An exchange for `request`, not sent yet: ``send(_:completion:)`` sends it.
    package func prepare(_ request: HTTPDNSTransport.Request, timeout: Duration, limit: Int, server: String)
        -> HTTP2DNSExchange
    {
        makeExchange(request, timeout: TimeAmount(timeout), limit: limit, server: server)
    }

    /// Sends `exchange` without a task: `completion` runs once, on the connection's event loop, with the whole answer
    /// or why there is none (as ``execute(_:timeout:limit:server:)`` throws); `CancellationError` when ``cancel(_:)``
    /// came first, even before this call.
    package func send(
        _ exchange: HTTP2DNSExchange, completion: @escaping (Result<HTTPDNSTransport.Response, any Error>) -> Void
    ) {
        exchange.completion = completion
        handOver(exchange)
    }

    /// Ends `exchange` with `CancellationError` (its stream reset) if it has not ended yet; from any thread.
    package func cancel(_ exchange: HTTP2DNSExchange) {
        let streams = self.streams
        channel.eventLoop.execute { streams.value.cancel(exchange) }
    }

    /// Queues `exchange` for the event loop: the first of a burst schedules one task that starts them all.
    private func handOver(_ exchange: HTTP2DNSExchange) {
        let schedule = handedOver.withLock { pending in
            pending.exchanges.append(exchange)
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        guard schedule else { return }
        let handedOver = self.handedOver
        let streams = self.streams
        channel.eventLoop.execute {
            // The burst is taken by swapping in an empty array made before the lock: the lock is held for two
            // moves, never for an allocation, so lookups handing over meanwhile rarely wait.
            var burst = [HTTP2DNSExchange]()
            burst.reserveCapacity(16)
            handedOver.withLock { pending in
                pending.scheduled = false
                swap(&burst, &pending.exchanges)
            }
            // One loop check and one clock read for the whole burst.
            let table = streams.value
            let now = NIODeadline.now()
            for exchange in burst { table.start(exchange, now: now) }
        }
    }

    /// Sends `count` requests, made by `make` on the event loop as streams free up, with at most `window` open at
    /// once, and returns every outcome in order: one hand-over to the event loop and one resumption for the whole
    /// batch (see ``HTTP2DNSBatch``). An entry is `nil` when its request was never sent because the connection was
    /// lost first.
    /// - Throws: `CancellationError` when the task is cancelled (the batch's open streams are reset).
    nonisolated(nonsending) package func executeAll(
        count: Int,
        window: Int,
        timeout: Duration,
        limit: Int,
        server: String,
        make: @escaping @Sendable (Int) -> HTTPDNSTransport.Request
    ) async throws -> [Result<HTTPDNSTransport.Response, any Error>?] {
        try Task.checkCancellation()
        guard count > 0 else { return [] }
        let batch = HTTP2DNSBatch(count: count, window: max(1, window)) { [self] index in
            makeExchange(make(index), timeout: TimeAmount(timeout), limit: limit, server: server)
        }
        let streams = self.streams
        let eventLoop = channel.eventLoop
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                batch.continuation = continuation
                eventLoop.execute { streams.value.run(batch) }
            }
        } onCancel: {
            eventLoop.execute { streams.value.cancel(batch) }
        }
    }

    /// An exchange for `request` on this connection. The path's parts and the request's own header fields go to
    /// the session as they are: it writes them into its field buffer (with `user-agent`, and `content-length` for
    /// a body) without building new strings.
    private func makeExchange(_ request: HTTPDNSTransport.Request, timeout: TimeAmount, limit: Int, server: String)
        -> HTTP2DNSExchange
    {
        HTTP2DNSExchange(
            method: request.method.rawValue, authority: authority,
            path: (
                basePath.hasPrefix("/") || (basePath.isEmpty && request.suffix.hasPrefix("/")) ? "" : "/", basePath,
                request.suffix
            ),
            headers: request.headers, body: request.body, timeout: timeout, limit: limit, server: server)
    }
}

/// Whether a connection still takes new streams; written on its event loop, read by the transport anywhere.
final class HTTP2ConnectionHealth: Sendable {
    let usable = Atomic(true)
}

/// The server did not select HTTP/2 in the TLS handshake.
struct HTTP2NotOffered: Error {
    var negotiated: String?
}

/// The connection ended or refused a stream before its answer came. Every HTTP DNS exchange is a query without
/// side effects, so `retryable` ones may be sent again on a new connection.
struct HTTP2ConnectionLost: Error, CustomStringConvertible {
    var message: String
    var retryable: Bool
    var description: String { message }
}

/// One exchange on an ``HTTP2DNSConnection``.
///
/// Created by the caller, then touched only on the connection's event loop (by ``HTTP2DNSStreams``): that is the
/// whole of its synchronisation (the hand-over's lock orders the caller's writes before the loop's reads), hence
/// `@unchecked Sendable`. Its continuation or completion runs exactly once, when the exchange leaves the handler's
/// table or is refused before entering it.
package final class HTTP2DNSExchange: @unchecked Sendable {
    let method: String
    let authority: String
    /// The path in parts: a leading slash when the others lack one, the endpoint's base path and the request's
    /// suffix.
    let path: (slash: StaticString, base: String, suffix: String)
    /// Header fields after the pseudo-header fields, as the request gave them (the session adds `user-agent`, and
    /// `content-length` for a body, and drops any `content-length` given here).
    let headers: [(String, String)]
    let body: [UInt8]?
    let timeout: TimeAmount
    let limit: Int
    let server: String
    var continuation: UnsafeContinuation<HTTPDNSTransport.Response, any Error>?
    /// Instead of a continuation: what runs on the event loop with the outcome.
    var completion: ((Result<HTTPDNSTransport.Response, any Error>) -> Void)?
    /// The batch the exchange belongs to, instead of a continuation, and its place in it.
    var batch: HTTP2DNSBatch?
    var index = 0
    var streamID: Int32?
    var deadline = NIODeadline.distantFuture
    var cancelled = false

    init(
        method: String, authority: String, path: (slash: StaticString, base: String, suffix: String),
        headers: [(String, String)], body: [UInt8]?,
        timeout: TimeAmount, limit: Int, server: String
    ) {
        self.method = method
        self.authority = authority
        self.path = path
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.limit = limit
        self.server = server
    }

    func finish(_ result: Result<HTTPDNSTransport.Response, any Error>) {
        if let batch {
            self.batch = nil
            batch.finished(index, result)
            return
        }
        if let completion {
            self.completion = nil
            completion(result)
            return
        }
        continuation?.resume(with: result)
        continuation = nil
    }
}

/// Waits for the TLS handshake, then lets `configure` set up the protocol the server selected by ALPN. Errors
/// before that (a certificate that does not verify, a server that closes) go to `failed` and end the connection.
private final class ALPNGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var configure: ((any Channel, String?) throws -> Void)?
    private let failed: (any Error) -> Void

    init(configure: @escaping (any Channel, String?) throws -> Void, failed: @escaping (any Error) -> Void) {
        self.configure = configure
        self.failed = failed
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let configure, let tls = event as? TLSUserEvent, case .handshakeCompleted(let protocolName) = tls else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        self.configure = nil
        do {
            try configure(context.channel, protocolName)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            failed(error)
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard configure != nil else {
            context.fireErrorCaught(error)
            return
        }
        configure = nil
        failed(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if configure != nil {
            configure = nil
            failed(
                HTTP2ConnectionLost(message: "the server closed the connection during the handshake", retryable: false))
        }
        context.fireChannelInactive()
    }
}
