import AsyncHTTPClient
import Foundation
import HTTPDNS
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import HTTPDNSPinnedClients
import HTTPDNSCore

/// HTTP exchanges pinned to chosen IPs, over AsyncHTTPClient clients from the resolver's ``PinnedClientPool``.
///
/// The pool keeps one client per (host, IP, proxy) and per client settings (from the ``ConnectionPolicy``: trust roots,
/// timeouts, limits), shared with HTTP DNS when the settings match, in a bounded least-recently-used set. Clients
/// never retry a failed connection themselves and connect with a short timeout: the engine decides about failover.
/// Certificates are always verified; extra trust roots are added to the system's.
final class PinnedTransport: Sendable {
    /// One request as it goes on the wire, mapped from the front's request once per hop: each attempt only pins the
    /// client to its ``address``.
    struct Exchange: Sendable {
        /// The request as AsyncHTTPClient sends it: the URL with the real host (it derives `Host` and SNI from it),
        /// the method, the headers and the body, in the types that go on the wire.
        var request: HTTPClientRequest
        /// The body's bytes, which ``request`` also carries: the race's connection sends them itself
        /// (AsyncHTTPClient's request body cannot be read back). The same storage, not a copy.
        var body: ByteBuffer?
        /// ``request``'s URL, parsed.
        var parsedURL: URL
        /// The real host, lowercased, without brackets or port.
        var host: String
        /// The address to connect to; `nil` lets AsyncHTTPClient resolve `host` itself.
        var address: IPAddress?
        /// An HTTP proxy to tunnel through (CONNECT to `host`, which the proxy resolves); then `address` is `nil`.
        var proxy: ProxyEnvironment.Proxy?
    }

    /// A response with its whole body.
    struct Response: Sendable {
        var status: Int
        var version: String
        var headers: HTTPHeaders
        var body: ByteBuffer
        /// From sending the request to the response head: the connect latency on a new connection.
        var headLatency: Duration
    }

    /// How a failed attempt may be retried on another address.
    typealias Retry = TransportFailure.Retry

    private let pool: PinnedClientPool
    /// Whether ``pool`` is this transport's own rather than the resolver's.
    private let ownsPool: Bool
    let profile: PinnedClientPool.Profile
    private let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    private let isShutdown = Atomic<Bool>(false)
    /// Made on the first raced https request (``racedTLSContext()``).
    let racedTLS = Locked<NIOSSLContext?>(nil)

    /// A transport whose clients come from `sharedPool` (the resolver's) under its own client settings, or from a
    /// pool of its own when that one runs on another event loop group.
    init(
        policy: ConnectionPolicy, sharedPool: PinnedClientPool, eventLoopGroup: any EventLoopGroup, logger: Logger
    ) throws(HTTPDNSError) {
        let ownsPool = sharedPool.eventLoopGroup !== eventLoopGroup
        let pool = ownsPool ? PinnedClientPool(eventLoopGroup: eventLoopGroup, logger: logger) : sharedPool
        let profile = PinnedClientPool.Profile(
            trustRoots: policy.additionalTrustRoots, connectTimeout: policy.connectTimeout,
            idleConnectionTimeout: policy.idleConnectionTimeout,
            maximumConnectionsPerHost: policy.maximumConnectionsPerHost, maximumClients: policy.maximumPinnedClients)
        do {
            try pool.register(profile)
        } catch {
            throw HTTPDNSError(
                code: error.code == .shutdown ? .shutdown : .invalidConfiguration, message: error.message,
                source: error)
        }
        self.pool = pool
        self.ownsPool = ownsPool
        self.profile = profile
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    deinit {
        // A transport dropped without shutdown() still gives its clients up: the pool closes them.
        // An own pool closes its clients when it goes.
        if !ownsPool, !isShutdown.load(ordering: .acquiring) { pool.unregister(profile) }
    }

    /// The number of pinned clients kept with this transport's settings (for tests).
    var clientCount: Int { pool.clientCount(profile: profile) }

    /// Client shutdowns still running in the pool (for tests).
    var closingCount: Int { pool.closingCount }

    /// Why an attempt failed, and whether any of the request had gone out.
    struct AttemptFailure: Error {
        var underlying: any Error
        var requestSent: Bool
    }

    /// A body larger than the cap of a collected answer.
    struct ResponseTooLarge: Error {}

    /// The whole of a streamed answer, up to `limit` bytes (the URL protocol's collected loads): the one streaming
    /// exchange, read to its end in the caller's task. The lease ends with it.
    /// - Throws: ``AttemptFailure`` (the request was sent) around the body's error or ``ResponseTooLarge``.
    static func collect(_ streamed: StreamedResponse, limit: Int) async throws -> Response {
        defer { streamed.lease.end() }
        let head = streamed.response
        if let length = head.headers.first(name: "Content-Length").flatMap(Int.init), length > limit {
            throw AttemptFailure(underlying: ResponseTooLarge(), requestSent: true)
        }
        let body: ByteBuffer
        do {
            body = try await head.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw AttemptFailure(underlying: ResponseTooLarge(), requestSent: true)
        } catch {
            throw AttemptFailure(underlying: error, requestSent: true)
        }
        return Response(
            status: Int(head.status.code), version: "HTTP/\(head.version.major).\(head.version.minor)",
            headers: head.headers, body: body, headLatency: streamed.headLatency)
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
    /// The request goes through AsyncHTTPClient's async `execute`, whose deadline ends at the response head; the
    /// connection holds the rest of the exchange to `deadline` (``ExchangeDeadline``), so a body that stalls fails
    /// with `HTTPDNSError.Code.timeout` without a task of its own. Only connect-phase errors
    /// (``isConnectPhase(_:)``) count as nothing sent: AsyncHTTPClient hands a request to a connection once it is
    /// established.
    ///
    /// `request.url` must name `host` exactly (lowercased): the pin is AsyncHTTPClient's `dnsOverride` for that name.
    /// With `connection` (what a connection race to `address` won), a request without a body goes out on that
    /// connection instead (``RacedExchange``).
    /// - Throws: ``AttemptFailure`` around the AsyncHTTPClient or NIO error (``classify(_:)`` maps it).
    func stream(
        _ request: HTTPClientRequest, host: String, address: IPAddress?, proxy: ProxyEnvironment.Proxy? = nil,
        deadline: NIODeadline, url: String, logger requestLogger: Logger?, connection: DialedConnection? = nil,
        raced: RacedExchange? = nil
    ) async throws -> StreamedResponse {
        let pooled = try acquire(
            .init(
                host: host, address: address, proxy: proxy.map { PinnedClientPool.Proxy(host: $0.host, port: $0.port) })
        )
        let (client, gate) = (pooled.client, pooled.gate)
        do {
            try await gate.enter(deadline: deadline, on: eventLoopGroup.next())
        } catch {
            pool.release(pooled)
            throw AttemptFailure(
                underlying: Self.gateFailure(error, host: host, limit: profile.maximumConnectionsPerHost),
                requestSent: false)
        }
        let lease = StreamLease { [pool] in
            gate.leave()
            pool.release(pooled)
        }
        var answer: RacedExchange.Answer?
        if let connection, let raced = raced ?? Self.raced(request) {
            do {
                answer = try await send(raced, on: connection, deadline: deadline)
            } catch {
                lease.end()
                throw error
            }
        }
        if let answer {
            let response = HTTPClientResponse(
                version: answer.head.version, status: answer.head.status, headers: answer.head.headers,
                body: .stream(answer.body))
            return streamed(
                response, headLatency: answer.headLatency, lease: lease, gate: gate, deadline: deadline, url: url)
        }
        var request = request
        if let value = ExchangeDeadline.headerValue(for: deadline) {
            request.headers.replaceOrAdd(name: ExchangeDeadline.header, value: value)
        }
        let started = ContinuousClock.now
        var response: HTTPClientResponse
        do {
            response = try await client.execute(request, deadline: deadline, logger: requestLogger ?? logger)
        } catch {
            lease.end()
            throw AttemptFailure(underlying: error, requestSent: !Self.isConnectPhase(error))
        }
        return streamed(
            response, headLatency: ContinuousClock.now - started, lease: lease, gate: gate, deadline: deadline, url: url
        )
    }

    /// `response` with its body watched to its end (which ends `lease`) and held to `deadline`.
    private func streamed(
        _ response: HTTPClientResponse, headLatency: Duration, lease: StreamLease, gate: ConnectionGate,
        deadline: NIODeadline, url: String
    ) -> StreamedResponse {
        var response = response
        let watch = BodyWatch()
        response.body = .stream(
            StreamedBody(response.body, end: BodyEnd(lease: lease, watch: watch), deadline: deadline, url: url))
        if response.version.major == 2 { gate.raiseLimit(to: ConnectionGate.http2Limit) }
        return StreamedResponse(response: response, headLatency: headLatency, lease: lease, watch: watch)
    }

    /// Sends `exchange` as ``stream(_:host:address:proxy:deadline:url:logger:connection:raced:)`` does: returns at
    /// the response head, and the body streams.
    func stream(
        _ exchange: Exchange, deadline: NIODeadline, connection: DialedConnection? = nil
    ) async throws -> StreamedResponse {
        try await stream(
            exchange.request, host: exchange.host, address: exchange.address, proxy: exchange.proxy, deadline: deadline,
            url: exchange.request.url, logger: nil, connection: connection,
            raced: connection == nil ? nil : Self.raced(exchange))
    }

    /// `error` from a body read as the fronts report it: typed, with the URL (a deadline is `HTTPDNSError.Code.timeout`).
    static func interceptionError(_ error: any Error, url: String) -> HTTPDNSError {
        if let error = error as? HTTPDNSError { return error }
        if error is CancellationError {
            return HTTPDNSError(code: .cancelled, message: "the body read was cancelled", url: url)
        }
        let (code, message, _) = classify(error)
        return HTTPDNSError(code: code, message: message, url: url, source: error)
    }

    /// Whether `error` comes from making the connection (TCP connect, TLS handshake): AsyncHTTPClient hands a request
    /// to a connection only once it is established, so nothing of the request was sent.
    static func isConnectPhase(_ error: any Error) -> Bool { TransportFailure.isConnectPhase(error) }

    private static func gateFailure(_ error: ConnectionGate.Refusal, host: String, limit: Int) -> any Error {
        switch error {
        case .cancelled:
            return CancellationError()
        case .deadlineExceeded:
            return HTTPDNSError(
                code: .timeout,
                message:
                    "every connection to \(host) stayed busy until the request's time ran out (at most \(limit) per address)"
            )
        }
    }

    /// Gives this transport's clients up (the pool closes them once their requests end) and waits for the closing;
    /// later requests fail with `HTTPDNSError.Code.shutdown`.
    func shutdown() async {
        guard !isShutdown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if ownsPool {
            await pool.shutdown()
        } else {
            pool.unregister(profile)
            await pool.waitForClosing()
        }
    }

    private func acquire(_ target: PinnedClientPool.Target) throws(HTTPDNSError) -> PinnedClientPool.Lease {
        do {
            guard !isShutdown.load(ordering: .acquiring) else { throw PinnedClientPool.Closed() }
            return try pool.acquire(target, profile: profile)
        } catch {
            throw HTTPDNSError(code: .shutdown, message: "the interceptor was shut down")
        }
    }

    /// Maps an error from AsyncHTTPClient, NIO or the transport to an `HTTPDNSError` and says whether the
    /// attempt may move on to another address.
    static func classify(_ error: any Error) -> (HTTPDNSError.Code, String, Retry) {
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
        case let error as HTTPDNSError:
            return (error.code, error.message, .never)
        case is CancellationError:
            return (.cancelled, "the request was cancelled", .never)
        case is ResponseTooLarge:
            return (.responseTooLarge, "the response body is larger than the cap", .never)
        default:
            guard let failure = TransportFailure.classify(error) else {
                return (.connectionFailed, "cannot connect: \(error)", .beforeSending)
            }
            return (failure.code, failure.message, failure.retry)
        }
    }
}
