import AsyncHTTPClient
import HTTPDNS
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// HTTP exchanges pinned to chosen IPs, over AsyncHTTPClient.
///
/// AsyncHTTPClient's `dnsOverride` connects to a chosen address while SNI and the certificate check stay on the
/// real host name, but it is a per-client setting. The transport therefore keeps one client per (host, IP), all on
/// one event loop group, in a bounded least-recently-used set. An evicted client is shut down once its last request
/// ends, so eviction never fails a request in flight. Clients never retry a failed connection themselves
/// (`retryConnectionEstablishment = false`) and connect with a short timeout: the interceptor decides about
/// failover. Certificates are always verified; extra trust roots are added to the system's.
final class PinnedTransport: Sendable {
    /// Transport settings.
    struct Configuration: Sendable {
        var connectTimeout: Duration
        var idleConnectionTimeout: Duration
        var additionalTrustRoots: [String]
        var maximumClients: Int
        var maximumConnectionsPerHost: Int
    }

    /// One request as it goes on the wire: the URL names the real host, the client is pinned to `address`.
    struct Exchange: Sendable {
        var method: String
        /// The URL with the real host, as AsyncHTTPClient sends it (it derives `Host` and SNI from it).
        var url: String
        /// The real host, lowercased, without brackets or port.
        var host: String
        /// The address to connect to; `nil` lets AsyncHTTPClient resolve `host` itself.
        var address: IPAddress?
        /// An HTTP proxy to tunnel through (CONNECT to `host`, which the proxy resolves); then `address` is `nil`.
        var proxy: ProxyEnvironment.Proxy?
        var headers: [(String, String)]
        var body: [UInt8]?
    }

    /// A response with its whole body.
    struct Response: Sendable {
        var status: Int
        var version: String
        var headers: [(String, String)]
        var body: ByteBuffer
        /// From sending the request to the response head: the connect latency on a new connection.
        var headLatency: Duration
    }

    /// How a failed attempt may be retried on another address.
    enum Retry: Sendable {
        /// Nothing was sent (connect, TLS handshake): any method may go to the next address.
        case beforeSending
        /// The connection broke after the request may have been sent: only idempotent methods move on.
        case afterSending
        /// Not on another address (a certificate rejection, a timeout of the whole exchange, a bad answer).
        case never
    }

    private struct Key: Hashable {
        var host: String
        var address: IPAddress?
        var proxy: ProxyEnvironment.Proxy?
    }

    private struct Entry {
        var client: HTTPClient
        /// Admits the client's requests as its connections can take them (see ``ConnectionGate``).
        var gate: ConnectionGate
        var inFlight: Int
        var lastUse: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Evicted clients with requests still in flight, by identity.
        var retired: [ObjectIdentifier: Entry] = [:]
        var tick: UInt64 = 0
        var isShutdown = false
    }

    let configuration: Configuration
    private let tlsConfiguration: TLSConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let state = Locked(State())
    private let closing = BackgroundClosers()

    init(configuration: Configuration, eventLoopGroup: any EventLoopGroup, logger: Logger) throws(InterceptionError) {
        guard configuration.connectTimeout > .zero, configuration.maximumClients > 0,
            configuration.maximumConnectionsPerHost > 0
        else {
            throw InterceptionError(
                code: .invalidConfiguration, message: "the connect timeout and connection limits must be positive")
        }
        let tls: TLSConfiguration
        do {
            tls = try TLSConfiguration.verifiedClient(additionalTrustRoots: configuration.additionalTrustRoots)
        } catch {
            throw InterceptionError(code: .invalidConfiguration, message: error.message, source: error)
        }
        self.configuration = configuration
        self.tlsConfiguration = tls
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    deinit {
        // AsyncHTTPClient requires an explicit shutdown; a transport dropped without one still closes its clients,
        // which stay alive until their shutdown completes.
        let clients = state.withLock { state in
            state.isShutdown ? [] : state.entries.values.map(\.client) + state.retired.values.map(\.client)
        }
        for client in clients { client.shutdown { _ in } }
    }

    /// The number of pinned clients kept (for tests).
    var clientCount: Int { state.withLock { $0.entries.count } }

    /// Client shutdowns still running (for tests).
    var closingCount: Int { closing.pending }

    /// Why an attempt failed, and whether any of the request had gone out.
    struct AttemptFailure: Error {
        var underlying: any Error
        var requestSent: Bool
    }

    /// Sends `exchange` and collects the whole response, within `deadline` (which covers the body too).
    ///
    /// The exchange runs on the event loop through AsyncHTTPClient's delegate API from start to finish, so a request
    /// costs one hop to the event loop and one back.
    /// - Throws: ``AttemptFailure`` around the AsyncHTTPClient or NIO error (``classify(_:)`` maps it), or
    ///   ``InterceptionError`` with ``InterceptionError/Code/shutdown``.
    func execute(_ exchange: Exchange, deadline: NIODeadline, maximumResponseBytes: Int) async throws -> Response {
        let key = Key(host: exchange.host, address: exchange.address, proxy: exchange.proxy)
        let (client, gate) = try acquire(key)
        defer { release(key, client) }
        do {
            try await gate.enter(deadline: deadline, on: eventLoopGroup.next())
        } catch {
            throw AttemptFailure(
                underlying: Self.gateFailure(
                    error, host: exchange.host, limit: configuration.maximumConnectionsPerHost), requestSent: false)
        }
        defer { gate.leave() }
        let collector = ResponseCollector(limit: maximumResponseBytes)
        let task: HTTPClient.Task<Response>
        do {
            let request = try HTTPClient.Request(
                url: exchange.url,
                method: HTTPMethod(rawValue: exchange.method),
                headers: HTTPHeaders(exchange.headers),
                body: exchange.body.map { .bytes($0) }
            )
            task = client.execute(request: request, delegate: collector, deadline: deadline, logger: logger)
        } catch {
            throw AttemptFailure(underlying: error, requestSent: false)
        }
        do {
            let response = try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
            // HTTP/2 multiplexes: streams, not connections, bound the client from now on.
            if response.version == "HTTP/2.0" { gate.raiseLimit(to: ConnectionGate.http2Limit) }
            return response
        } catch {
            throw AttemptFailure(underlying: error, requestSent: collector.requestSent)
        }
    }

    /// A response whose body is still to be read, and the lease on its client's connection place.
    struct StreamedResponse: Sendable {
        var response: HTTPClientResponse
        /// From sending the request to the response head.
        var headLatency: Duration
        /// Ends (gives the connection place and the client back) when the exchange is over, or when the last
        /// reference to it goes away.
        var lease: StreamLease
        /// The body's bytes and its end, for the trace.
        var watch: BodyWatch
    }

    /// Sends `request` to `address` (`nil`: the client resolves `host` itself) and returns as soon as the response
    /// head arrived; the body streams with back-pressure, and `deadline` covers it too. The client and its connection
    /// place stay taken until the body ended or was dropped.
    ///
    /// A request without a body goes through AsyncHTTPClient's delegate API, which hands each part over on the
    /// event loop and says whether the request went out; one with a body (only the async API can send an
    /// `HTTPClientRequest.Body`) through the async API with a ``BodyPump``, where only connect-phase errors
    /// (``isConnectPhase(_:)``) count as nothing sent.
    ///
    /// `request.url` must name `host` exactly (lowercased): the pin is AsyncHTTPClient's `dnsOverride` for that name.
    /// - Throws: ``AttemptFailure`` around the AsyncHTTPClient or NIO error (``classify(_:)`` maps it).
    func stream(
        _ request: HTTPClientRequest, host: String, address: IPAddress?, deadline: NIODeadline, url: String,
        logger requestLogger: Logger?
    ) async throws -> StreamedResponse {
        let key = Key(host: host, address: address, proxy: nil)
        let (client, gate) = try acquire(key)
        do {
            try await gate.enter(deadline: deadline, on: eventLoopGroup.next())
        } catch {
            release(key, client)
            throw AttemptFailure(
                underlying: Self.gateFailure(error, host: host, limit: configuration.maximumConnectionsPerHost),
                requestSent: false)
        }
        let lease = StreamLease { [self] in
            gate.leave()
            release(key, client)
        }
        let watch = BodyWatch()
        let started = ContinuousClock.now
        var response: HTTPClientResponse
        if request.body == nil {
            response = try await streamWithoutBody(
                request, client: client, deadline: deadline, url: url, lease: lease, watch: watch, logger: requestLogger
            )
        } else {
            do {
                response = try await client.execute(request, deadline: deadline, logger: requestLogger ?? logger)
            } catch {
                lease.end()
                throw AttemptFailure(underlying: error, requestSent: !Self.isConnectPhase(error))
            }
            response.body = BodyPump.start(
                response.body, deadline: deadline, url: url, on: eventLoopGroup.next(),
                onPart: { watch.add($0) },
                onEnd: { error in
                    lease.end()
                    watch.end(error)
                })
        }
        if response.version.major == 2 { gate.raiseLimit(to: ConnectionGate.http2Limit) }
        return StreamedResponse(
            response: response, headLatency: ContinuousClock.now - started, lease: lease, watch: watch)
    }

    private func streamWithoutBody(
        _ request: HTTPClientRequest, client: HTTPClient, deadline: NIODeadline, url: String, lease: StreamLease,
        watch: BodyWatch, logger requestLogger: Logger?
    ) async throws -> HTTPClientResponse {
        let wire: HTTPClient.Request
        do {
            wire = try HTTPClient.Request(url: request.url, method: request.method, headers: request.headers)
        } catch {
            lease.end()
            throw AttemptFailure(underlying: error, requestSent: false)
        }
        let (body, source, demand) = StreamingDelegate.makeBody()
        let delegate = StreamingDelegate(
            eventLoop: eventLoopGroup.next(), source: source, demand: demand, watch: watch, url: url)
        let task = client.execute(
            request: wire, delegate: delegate, deadline: deadline, logger: requestLogger ?? logger)
        demand.attach(task)
        task.futureResult.whenComplete { _ in lease.end() }
        do {
            let head = try await withTaskCancellationHandler {
                try await delegate.head.futureResult.get()
            } onCancel: {
                task.cancel()
            }
            return HTTPClientResponse(
                version: head.version, status: head.status, headers: head.headers, body: .stream(body))
        } catch {
            throw AttemptFailure(underlying: error, requestSent: delegate.requestSent)
        }
    }

    /// `error` from a body read as the fronts report it: typed, with the URL (a deadline is `timedOut`).
    static func interceptionError(_ error: any Error, url: String) -> InterceptionError {
        if let error = error as? InterceptionError { return error }
        if error is CancellationError {
            return InterceptionError(code: .cancelled, message: "the body read was cancelled", url: url)
        }
        let (code, message, _) = classify(error)
        return InterceptionError(code: code, message: message, url: url, source: error)
    }

    /// Whether `error` comes from making the connection (TCP connect, TLS handshake): AsyncHTTPClient hands a request
    /// to a connection only once it is established, so nothing of the request was sent.
    static func isConnectPhase(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError:
            return error == .connectTimeout || error == .tlsHandshakeTimeout
        case is NIOConnectionError:
            return true
        case ChannelError.connectTimeout:
            return true
        case let error as NIOSSLError:
            if case .handshakeFailed = error { return true }
            return false
        case is NIOSSLExtraError:
            return true
        case let error as IOError:
            return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL].contains(error.errnoCode)
        default:
            return false
        }
    }

    private static func gateFailure(_ error: ConnectionGate.Refusal, host: String, limit: Int) -> any Error {
        switch error {
        case .cancelled:
            return CancellationError()
        case .deadlineExceeded:
            return InterceptionError(
                code: .timedOut,
                message:
                    "every connection to \(host) stayed busy until the request's time ran out (at most \(limit) per address)"
            )
        }
    }

    /// Closes every client; later requests fail with ``InterceptionError/Code/shutdown``.
    func shutdown() async {
        let clients = state.withLock { state in
            state.isShutdown = true
            defer {
                state.entries.removeAll()
                state.retired.removeAll()
            }
            return state.entries.values.map(\.client) + state.retired.values.map(\.client)
        }
        for client in clients { closing.close(client, logger: logger) }
        await closing.waitForAll()
    }

    private func acquire(_ key: Key) throws(InterceptionError) -> (HTTPClient, ConnectionGate) {
        let (entry, evicted) = try state.withLock { state throws(InterceptionError) -> (Entry, HTTPClient?) in
            guard !state.isShutdown else {
                throw InterceptionError(code: .shutdown, message: "the interceptor was shut down")
            }
            state.tick &+= 1
            if var entry = state.entries[key] {
                entry.inFlight += 1
                entry.lastUse = state.tick
                state.entries[key] = entry
                return (entry, nil)
            }
            let created = Entry(
                client: makeClient(for: key), gate: ConnectionGate(limit: configuration.maximumConnectionsPerHost),
                inFlight: 1, lastUse: state.tick)
            state.entries[key] = created
            var evicted: HTTPClient?
            if state.entries.count > configuration.maximumClients,
                let (oldest, entry) = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })
            {
                state.entries[oldest] = nil
                if entry.inFlight == 0 {
                    evicted = entry.client
                } else {
                    state.retired[ObjectIdentifier(entry.client)] = entry
                }
            }
            return (created, evicted)
        }
        if let evicted { closing.close(evicted, logger: logger) }
        return (entry.client, entry.gate)
    }

    private func release(_ key: Key, _ client: HTTPClient) {
        let finished = state.withLock { state -> HTTPClient? in
            if var entry = state.entries[key], entry.client === client {
                entry.inFlight -= 1
                state.entries[key] = entry
                return nil
            }
            let id = ObjectIdentifier(client)
            guard var entry = state.retired[id] else { return nil }
            entry.inFlight -= 1
            if entry.inFlight > 0 {
                state.retired[id] = entry
                return nil
            }
            state.retired[id] = nil
            return client
        }
        if let finished { closing.close(finished, logger: logger) }
    }

    private func makeClient(for key: Key) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tlsConfiguration,
            redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(self.configuration.connectTimeout)),
            connectionPool: .init(
                idleTimeout: TimeAmount(self.configuration.idleConnectionTimeout),
                concurrentHTTP1ConnectionsPerHostSoftLimit: self.configuration.maximumConnectionsPerHost
            ),
            proxy: nil,
            decompression: .disabled
        )
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .automatic
        if let address = key.address { configuration.dnsOverride = [key.host: address.description] }
        if let proxy = key.proxy { configuration.proxy = .server(host: proxy.host, port: proxy.port) }
        return HTTPClient(
            eventLoopGroup: eventLoopGroup, configuration: configuration, backgroundActivityLogger: logger)
    }

    /// Maps an error from AsyncHTTPClient, NIO or the transport to an ``InterceptionError`` and says whether the
    /// attempt may move on to another address.
    static func classify(_ error: any Error) -> (InterceptionError.Code, String, Retry) {
        if let failure = error as? AttemptFailure {
            let (code, message, retry) = classify(failure.underlying)
            switch (failure.requestSent, retry) {
            case (false, .afterSending):
                // Nothing went out: any failure of the connection itself may move on to the next address.
                return (code, message, .beforeSending)
            case (true, .beforeSending):
                // Some of the request was written, so the server may have acted on it (a reset after it read a
                // POST): whatever the error, only an idempotent method may be sent again elsewhere.
                return (code, message, .afterSending)
            default:
                return (code, message, retry)
            }
        }
        switch error {
        case let error as InterceptionError:
            return (error.code, error.message, .never)
        case is CancellationError:
            return (.cancelled, "the request was cancelled", .never)
        case is NIOTooManyBytesError, is ResponseCollector.TooLarge:
            return (.responseTooLarge, "the response body is larger than the cap", .never)
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return (.certificateRejected, "the certificate does not name the host: \(error)", .never)
        case let error as NIOSSLError:
            if isCertificateRejection(error) {
                return (.certificateRejected, "the server's certificate was rejected: \(error)", .never)
            }
            return (.tlsFailure, "TLS handshake failed: \(error)", .beforeSending)
        case is NIOSSLExtraError, is BoringSSLError:
            if isCertificateRejection(error) {
                return (.certificateRejected, "the server's certificate was rejected: \(error)", .never)
            }
            return (.tlsFailure, "TLS failed: \(error)", .beforeSending)
        case let error as HTTPClientError:
            switch error {
            case .connectTimeout, .tlsHandshakeTimeout:
                return (.timedOut, "connect timed out (\(error))", .beforeSending)
            case .deadlineExceeded, .readTimeout, .writeTimeout, .getConnectionFromPoolTimeout:
                return (.timedOut, "no complete answer in time (\(error))", .never)
            case .remoteConnectionClosed:
                return (.connectionLost, "the server closed the connection", .afterSending)
            case .cancelled:
                return (.cancelled, "the request was cancelled", .never)
            case .alreadyShutdown:
                return (.shutdown, "the interceptor was shut down", .never)
            case .invalidURL, .emptyHost, .emptyScheme:
                return (.badURL, "invalid URL (\(error))", .never)
            default:
                if error == .bodyLengthMismatch || error == .traceRequestWithBody {
                    return (.invalidRequest, "the request cannot be sent: \(error)", .never)
                }
                // Header names and values are checked before sending (``PinnedTransport/Exchange``); whatever else
                // the client rejects is reported without its text, which may quote a header value.
                return (
                    .badServerResponse, "HTTP exchange failed (AsyncHTTPClient rejected the request or the answer)",
                    .never
                )
            }
        case let error as HTTPParserError:
            return (.badServerResponse, "the answer is not valid HTTP: \(error)", .never)
        case ChannelError.connectTimeout:
            return (.timedOut, "connect timed out", .beforeSending)
        case is NIOConnectionError, is IOError, is ChannelError:
            return (.connectionFailed, "cannot connect: \(error)", .beforeSending)
        default:
            return (.connectionFailed, "cannot connect: \(error)", .beforeSending)
        }
    }

    private static func isCertificateRejection(_ error: any Error) -> Bool {
        let text = String(describing: error)
        return text.contains("CERTIFICATE_VERIFY_FAILED") || text.contains("certificate verify failed")
            || text.contains("failedToValidateHostname") || text.contains("unableToValidateCertificate")
    }
}

/// Runs `onEnd` once: at ``end()``, or when the last reference goes away (a body dropped unread).
final class StreamLease: Sendable {
    private let ended = Atomic<Bool>(false)
    private let onEnd: @Sendable () -> Void

    init(onEnd: @escaping @Sendable () -> Void) { self.onEnd = onEnd }

    func end() {
        if !ended.exchange(true, ordering: .acquiringAndReleasing) { onEnd() }
    }

    deinit { end() }
}

/// Shuts AsyncHTTPClient clients down in the background and lets the owner wait for the shutdowns to end. A
/// finished shutdown forgets itself, so evicting clients for ever does not grow this.
private final class BackgroundClosers: Sendable {
    private let tasks = Locked<[Int: Task<Void, Never>]>([:])
    private let counter = Atomic<Int>(0)

    func close(_ client: HTTPClient, logger: Logger) {
        let id = counter.add(1, ordering: .relaxed).newValue
        tasks.withLock { tasks in
            // The task removes itself under the same lock, so it cannot do so before it is recorded.
            tasks[id] = Task { [self] in
                do { try await client.shutdown() } catch { logger.debug("pinned client shutdown: \(error)") }
                _ = self.tasks.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// Shutdowns still running.
    var pending: Int { tasks.withLock { $0.count } }

    func waitForAll() async {
        while true {
            let pending = tasks.withLock { tasks in
                defer { tasks.removeAll() }
                return Array(tasks.values)
            }
            if pending.isEmpty { return }
            for task in pending { await task.value }
        }
    }
}

/// Collects a response on the event loop, with a size cap, the time to the response head, and whether any of the
/// request was sent.
///
/// `@unchecked Sendable`: AsyncHTTPClient calls every delegate method on the request's event loop, one at a time, so
/// the mutable fields are only touched there; `requestSent` is an atomic because the caller reads it after a failure.
final class ResponseCollector: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = PinnedTransport.Response

    struct TooLarge: Error {}

    private let limit: Int
    private let started = ContinuousClock.now
    private let sent = Atomic<Bool>(false)
    private var head: HTTPResponseHead?
    private var headLatency: Duration = .zero
    private var body: ByteBuffer?

    init(limit: Int) { self.limit = limit }

    var requestSent: Bool { sent.load(ordering: .acquiring) }

    func didSendRequestHead(task: HTTPClient.Task<Response>, _ head: HTTPRequestHead) {
        sent.store(true, ordering: .releasing)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.head = head
        headLatency = ContinuousClock.now - started
        if let length = head.headers.first(name: "Content-Length").flatMap(Int.init), length > limit {
            return task.eventLoop.makeFailedFuture(TooLarge())
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        var part = buffer
        if body == nil {
            body = part
        } else {
            body!.writeBuffer(&part)
        }
        if (body?.readableBytes ?? 0) > limit { return task.eventLoop.makeFailedFuture(TooLarge()) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        guard let head else { throw HTTPClientError.remoteConnectionClosed }
        return Response(
            status: Int(head.status.code),
            version: "HTTP/\(head.version.major).\(head.version.minor)",
            headers: head.headers.map { ($0.name, $0.value) },
            body: body ?? ByteBuffer(),
            headLatency: headLatency
        )
    }
}
