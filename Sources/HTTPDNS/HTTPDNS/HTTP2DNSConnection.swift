import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// One TLS connection with HTTP/2 to an HTTP DNS server, built for many small exchanges at once.
///
/// Every lookup is one HTTP/2 stream on this connection, up to the server's `SETTINGS_MAX_CONCURRENT_STREAMS`
/// (NIOHTTP2 queues streams beyond that until one ends). There is no per-stream channel or pipeline: one handler
/// (``HTTP2DNSStreams``) writes the HEADERS (and DATA) frames of each request and collects the answering frames by
/// stream ID. Writes made in one event-loop tick go out with one flush, so a burst of lookups shares TLS records.
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

    /// The settings sent to the server: no server push, a per-stream window larger than any accepted answer.
    static func localSettings(maximumResponseBytes: Int) -> HTTP2Settings {
        [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 0),
            HTTP2Setting(parameter: .initialWindowSize, value: min(maximumResponseBytes + 16_384, Int(Int32.max))),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16_384),
        ]
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
    ) -> EventLoopFuture<HTTP2DNSConnection> {
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
                        let streams = HTTP2DNSStreams(
                            idleTimeout: TimeAmount(idleTimeout), health: health,
                            connectionWindow: 8 << 20)
                        let connection = HTTP2DNSConnection(
                            channel: channel, streams: streams, endpoint: endpoint, health: health)
                        // Ready once the server's SETTINGS arrived: before that its stream limit is unknown, and a
                        // first burst of lookups would overrun it.
                        streams.whenReady = { result in ready.completeWith(result.map { connection }) }
                        try channel.pipeline.syncOperations.addHandlers(
                            NIOHTTP2Handler(mode: .client, initialSettings: settings), streams)
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
                return eventLoop.makeFailedFuture(error)
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
        return ready.futureResult
    }

    /// Sends one request and returns the whole answer.
    /// - Throws: ``DNSError`` (timeout, response too large), ``HTTP2ConnectionLost``, `CancellationError`.
    func execute(
        _ request: HTTPDNSTransport.Request,
        timeout: Duration,
        limit: Int,
        server: String
    ) async throws -> HTTPDNSTransport.Response {
        try Task.checkCancellation()
        var headers = HPACKHeaders()
        headers.add(name: ":method", value: request.method.rawValue)
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: authority)
        var path = basePath + request.suffix
        if !path.hasPrefix("/") { path = "/" + path }
        headers.add(name: ":path", value: path)
        for (name, value) in request.headers { headers.add(name: name.lowercased(), value: value) }
        headers.add(name: "user-agent", value: "swift-httpdns")
        if let body = request.body { headers.replaceOrAdd(name: "content-length", value: String(body.count)) }
        let exchange = HTTP2DNSExchange(
            headers: headers, body: request.body, timeout: TimeAmount(timeout), limit: limit, server: server)
        let streams = self.streams
        let eventLoop = channel.eventLoop
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                exchange.continuation = continuation
                eventLoop.execute { streams.value.start(exchange) }
            }
        } onCancel: {
            eventLoop.execute { streams.value.cancel(exchange) }
        }
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
/// whole of its synchronisation, hence `@unchecked Sendable`. The continuation is resumed exactly once, when the
/// exchange leaves the handler's table or is refused before entering it.
final class HTTP2DNSExchange: @unchecked Sendable {
    let headers: HPACKHeaders
    let body: [UInt8]?
    let timeout: TimeAmount
    let limit: Int
    let server: String
    var continuation: UnsafeContinuation<HTTPDNSTransport.Response, any Error>?
    var streamID: HTTP2StreamID?
    var deadline = NIODeadline.distantFuture
    var cancelled = false
    var status: Int?
    var contentType: String?
    var received: ByteBuffer?

    init(headers: HPACKHeaders, body: [UInt8]?, timeout: TimeAmount, limit: Int, server: String) {
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.limit = limit
        self.server = server
    }

    func finish(_ result: Result<HTTPDNSTransport.Response, any Error>) {
        continuation?.resume(with: result)
        continuation = nil
    }
}

/// The connection's stream table: writes requests as HTTP/2 frames and matches the answering frames to them by
/// stream ID. Lives in the channel pipeline after `NIOHTTP2Handler` (frame mode, no multiplexer) and runs only on
/// the channel's event loop.
final class HTTP2DNSStreams: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var context: ChannelHandlerContext?
    private var active: [HTTP2StreamID: HTTP2DNSExchange] = [:]
    private var nextStreamID: Int32 = 1
    private var closed = false
    private var flushScheduled = false
    /// One timer for the whole table: at the earliest deadline while streams run, else at the idle limit.
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var lastActivity = NIODeadline.now()
    private let idleTimeout: TimeAmount
    private let health: HTTP2ConnectionHealth
    /// Connection-level receive window: granted once at start, topped up as answers arrive.
    private let connectionWindow: Int
    private var unacknowledgedBytes = 0
    private var timeouts = 0
    private var streamsStarted = 0
    /// Called once: when the server's first SETTINGS frame arrives, or with the error that ended the connection
    /// before it.
    var whenReady: ((Result<Void, any Error>) -> Void)?

    init(idleTimeout: TimeAmount, health: HTTP2ConnectionHealth, connectionWindow: Int) {
        self.idleTimeout = idleTimeout
        self.health = health
        self.connectionWindow = connectionWindow
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The protocol's initial connection window is 65,535 bytes; grant the rest at once.
        let grant = HTTP2Frame(
            streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connectionWindow - 65_535))
        context.writeAndFlush(wrapOutboundOut(grant), promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        shutDown(HTTP2ConnectionLost(message: "the HTTP/2 connection closed", retryable: true))
        self.context = nil
    }

    // MARK: Requests

    func start(_ exchange: HTTP2DNSExchange) {
        guard !exchange.cancelled else {
            exchange.finish(.failure(CancellationError()))
            return
        }
        guard let context, !closed, nextStreamID < Int32.max - 2 else {
            retire()
            exchange.finish(.failure(HTTP2ConnectionLost(message: "the HTTP/2 connection is closing", retryable: true)))
            return
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        streamsStarted += 1
        if nextStreamID >= Int32.max - 2 { retire() }
        let now = NIODeadline.now()
        lastActivity = now
        exchange.streamID = id
        exchange.deadline = now + exchange.timeout
        active[id] = exchange
        let hasBody = exchange.body != nil
        let headers = HTTP2Frame(streamID: id, payload: .headers(.init(headers: exchange.headers, endStream: !hasBody)))
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(headers), promise: hasBody ? nil : written)
        if let body = exchange.body {
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            let data = HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))
            context.write(wrapOutboundOut(data), promise: written)
        }
        written.futureResult.assumeIsolated().whenFailure { [weak self] error in
            self?.complete(
                id, .failure(HTTP2ConnectionLost(message: "the request could not be sent: \(error)", retryable: true)))
        }
        scheduleFlush()
        if timerDeadline.map({ $0 > exchange.deadline }) ?? true { arm(at: exchange.deadline) }
    }

    func cancel(_ exchange: HTTP2DNSExchange) {
        exchange.cancelled = true
        guard let id = exchange.streamID, active[id] === exchange else { return }
        complete(id, .failure(CancellationError()))
        reset(id)
    }

    // MARK: Frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            guard let exchange = active[frame.streamID] else { return }
            if exchange.status == nil {
                guard let status = headers.headers.first(name: ":status").flatMap(Int.init) else {
                    fail(frame.streamID, "the answer has no valid :status")
                    return
                }
                if (100..<200).contains(status) { return }  // informational; the real answer follows
                exchange.status = status
                exchange.contentType = headers.headers.first(name: "content-type")
            }
            if headers.endStream { completeExchange(frame.streamID) }
        case .data(let payload):
            returnWindow(payload.data.readableBytes + (payload.paddingBytes ?? 0))
            guard let exchange = active[frame.streamID], case .byteBuffer(var bytes) = payload.data else { return }
            if exchange.received == nil {
                exchange.received = bytes
            } else {
                exchange.received!.writeBuffer(&bytes)
            }
            if exchange.received!.readableBytes > exchange.limit {
                complete(frame.streamID, .failure(NIOTooManyBytesError(maxBytes: exchange.limit)))
                reset(frame.streamID)
            } else if payload.endStream {
                completeExchange(frame.streamID)
            }
        case .rstStream(let code):
            guard active[frame.streamID] != nil else { return }
            complete(
                frame.streamID,
                .failure(
                    HTTP2ConnectionLost(
                        message: "the server reset the stream (\(code))", retryable: code == .refusedStream)))
        case .settings(.settings):
            if let whenReady {
                self.whenReady = nil
                // A new connection gets a grace period before its first stream: on a loaded machine the lookup
                // that asked for it may take a while to be scheduled, and closing it would only make another.
                lastActivity = .now()
                arm(at: idleDeadline)
                whenReady(.success(()))
            }
        case .goAway(let lastStreamID, let code, _):
            retire()
            for id in active.keys where id > lastStreamID {
                complete(
                    id, .failure(HTTP2ConnectionLost(message: "the server sent GOAWAY (\(code))", retryable: true)))
            }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        shutDown(HTTP2ConnectionLost(message: "the HTTP/2 connection closed before the answer", retryable: true))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            fail(streamError.streamID, "HTTP/2 stream error: \(streamError.baseError)")
            return
        }
        shutDown(error)
        context.close(promise: nil)
    }

    // MARK: Internals

    private func completeExchange(_ id: HTTP2StreamID) {
        guard let exchange = active[id] else { return }
        let body = exchange.received.map { Array($0.readableBytesView) } ?? []
        complete(
            id,
            .success(
                .init(
                    status: exchange.status ?? 0, contentType: exchange.contentType, body: body, server: exchange.server
                )))
    }

    private func fail(_ id: HTTP2StreamID, _ message: String) {
        complete(id, .failure(HTTP2ConnectionLost(message: message, retryable: false)))
        reset(id)
    }

    private func complete(_ id: HTTP2StreamID, _ result: Result<HTTPDNSTransport.Response, any Error>) {
        guard let exchange = active.removeValue(forKey: id) else { return }
        exchange.finish(result)
        if active.isEmpty, !closed, timerDeadline.map({ $0 > idleDeadline }) ?? true { arm(at: idleDeadline) }
    }

    private func reset(_ id: HTTP2StreamID) {
        guard let context, !closed else { return }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
        scheduleFlush()
    }

    /// Fails every open exchange and stops taking new ones.
    private func shutDown(_ error: any Error) {
        if let whenReady {
            self.whenReady = nil
            whenReady(.failure(error))
        }
        closed = true
        retire()
        timer?.cancel()
        timer = nil
        let open = active
        active.removeAll()
        for exchange in open.values { exchange.finish(.failure(error)) }
    }

    /// No new streams: the transport opens another connection for later requests.
    private func retire() { health.usable.store(false, ordering: .relaxed) }

    private func scheduleFlush() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            self.context?.flush()
        }
    }

    /// Gives the window used by received DATA back to the server in batches.
    private func returnWindow(_ bytes: Int) {
        unacknowledgedBytes += bytes
        guard unacknowledgedBytes >= connectionWindow / 2, let context, !closed else { return }
        let update = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))
        unacknowledgedBytes = 0
        context.write(wrapOutboundOut(update), promise: nil)
        scheduleFlush()
    }

    private func arm(at deadline: NIODeadline) {
        guard let context else { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            self?.timerFired()
        }
    }

    private func timerFired() {
        timer = nil
        timerDeadline = nil
        guard !closed, let context else { return }
        let now = NIODeadline.now()
        var earliest = NIODeadline.distantFuture
        for (id, exchange) in active {
            if exchange.deadline <= now {
                timeouts += 1
                let limit = exchange.timeout
                complete(
                    id,
                    .failure(
                        DNSError(
                            code: .timeout,
                            message: "no complete HTTP answer within \(Duration.nanoseconds(limit.nanoseconds))")))
                reset(id)
            } else {
                earliest = min(earliest, exchange.deadline)
            }
        }
        // A connection on which many answers never came is not worth keeping: the next one starts clean (and
        // gets back any window that answers to reset streams would have used).
        if timeouts >= 64 { retire() }
        if !active.isEmpty {
            arm(at: earliest)
        } else if now >= idleDeadline {
            retire()
            context.close(promise: nil)
        } else {
            arm(at: idleDeadline)
        }
    }

    /// When the connection counts as idle: ``idleTimeout`` after the last stream started, or the first-use grace
    /// period for a connection that has not carried one yet.
    private var idleDeadline: NIODeadline {
        lastActivity + (streamsStarted > 0 ? idleTimeout : max(idleTimeout, .seconds(10)))
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
