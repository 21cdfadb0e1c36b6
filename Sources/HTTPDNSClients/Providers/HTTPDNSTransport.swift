import AsyncHTTPClient
public import Logging
package import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
public import HTTPDNSCore
package import HTTPDNSPinnedClients

/// The HTTP client shared by every HTTP DNS resolver: connection pools, TLS trust, timeouts, bootstrap pinning.
///
/// `https` endpoints are asked over one HTTP/2 connection per (endpoint, address), written directly on
/// swift-nio-http2: every lookup is one stream, many at once, with no per-request channel (see
/// `HTTP2DNSConnection`). A server that does not offer HTTP/2 in ALPN, an endpoint with an IP literal host and
/// plain `http` endpoints go through AsyncHTTPClient (HTTP/1.1) instead. Either way the TCP connection goes to the
/// bootstrap IP when there is one, while SNI and the certificate check use the endpoint's real host name.
/// Certificates are always verified; ``Configuration/additionalTrustRoots`` adds private CAs to the system roots and
/// there is no way to turn verification off.
/// A connection that cannot be made (refused, unreachable, a certificate that does not verify) fails the exchange
/// at once instead of being retried until the connect timeout, so the next bootstrap address, the next endpoint or
/// the next source is asked without delay.
/// Call ``shutdown()`` when done; it closes every connection.
public final class HTTPDNSTransport: Sendable {
    /// One HTTP request relative to an endpoint's base URL.
    package struct Request: Sendable {
        var method: HTTPMethod = .GET
        /// Appended to the endpoint's base URL: a path and/or query, e.g. `?dns=…` or `/123/d?host=…`.
        var suffix: String
        var headers: [(String, String)] = []
        var body: [UInt8]? = nil
        /// A redacted form of `suffix` for logs and errors, when `suffix` carries something sensitive.
        var loggableSuffix: String? = nil
    }

    /// A response with its whole body.
    package struct Response: Sendable {
        var status: Int
        var contentType: String?
        var body: [UInt8]
        /// The address the response came from, `IP:PORT` or `host:port`.
        var server: String
    }

    /// Which HTTP/2 connection serves a connection target: the endpoint's host (SNI and the certificate's name), the
    /// address dialled, the port and the base path its requests go to (two endpoints of one host and address on
    /// different ports are different servers, and two on different paths, `/dns-query` and `/resolve` of one
    /// service, must not send to each other's path).
    struct PinKey: Hashable {
        var host: String
        var address: IPAddress?
        var port: Int
        var path: String

        init(_ endpoint: HTTPDNSEndpoint, address: IPAddress?) {
            (host, self.address, port, path) = (endpoint.host, address, endpoint.port, endpoint.path)
        }
    }

    /// An HTTP/2 connection being made or made.
    enum HTTP2Slot {
        case connecting(id: UInt64, HTTP2DNSConnection.Attempt)
        case ready(id: UInt64, HTTP2DNSConnection)

        var id: UInt64 {
            switch self {
            case .connecting(let id, _), .ready(let id, _): id
            }
        }
    }

    struct State {
        var http2: [PinKey: HTTP2Slot] = [:]
        /// Targets whose server did not select HTTP/2: they are asked over HTTP/1.1.
        var http1Only: Set<PinKey> = []
        var nextSlotID: UInt64 = 0
        var isShutdown = false
    }

    /// The settings this transport was created with.
    let configuration: Configuration
    /// Where the HTTP/1.1 clients come from: the resolver's pool when built from settings, else one of its own.
    private let pool: PinnedClientPool
    private let ownsPool: Bool
    /// This transport's client settings in the pool.
    private let profile: PinnedClientPool.Profile
    /// The same trust and TLS floor, offering only `h2` in ALPN, for ``HTTP2DNSConnection``.
    private let http2Context: NIOSSLContext
    private let eventLoopGroup: any EventLoopGroup
    let state = Locked(State())

    /// How many HTTP/2 connections are being set up (for tests).
    var connectionsBeingSetUp: Int {
        state.withLock { $0.http2.values.count { if case .connecting = $0 { true } else { false } } }
    }
    private let logger: Logger

    /// Creates a transport that several ``HTTPDNSResolver``s can share (``HTTPDNSResolver/init(configuration:transport:logger:)``);
    /// call ``shutdown()`` when they are done.
    /// - Parameters:
    ///   - configuration: Timeouts, trust roots, size cap.
    ///   - logger: For connection-level events; request logs go to the resolver's logger.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` when a trust-root file cannot be read or holds no
    ///   certificate, or a timeout is not positive.
    public convenience init(
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "httpdns.transport", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(HTTPDNSError) {
        try self.init(
            configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: logger)
    }

    /// The same, on `eventLoopGroup`'s event loops.
    package convenience init(
        configuration: Configuration = .init(),
        eventLoopGroup: any EventLoopGroup,
        logger: Logger = Logger(label: "httpdns.transport", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(HTTPDNSError) {
        try self.init(
            configuration: configuration, pool: PinnedClientPool(eventLoopGroup: eventLoopGroup, logger: logger),
            ownsPool: true, eventLoopGroup: eventLoopGroup, logger: logger)
    }

    /// A transport whose HTTP/1.1 clients come from `pool`, which it shuts down at ``shutdown()`` when it `ownsPool`.
    package init(
        configuration: Configuration, pool: PinnedClientPool, ownsPool: Bool, eventLoopGroup: any EventLoopGroup,
        logger: Logger
    ) throws(HTTPDNSError) {
        guard configuration.requestTimeout > .zero, configuration.connectTimeout > .zero,
            configuration.maximumResponseBytes > 0
        else {
            throw HTTPDNSError(code: .invalidConfiguration, message: "HTTP DNS timeouts and size cap must be positive")
        }
        let tls = try TLSConfiguration.verifiedClient(additionalTrustRoots: configuration.additionalTrustRoots)
        var http2TLS = tls
        http2TLS.applicationProtocols = ["h2"]
        // Closing sends close_notify; many servers (dnsdist among them) never answer it, and nothing is owed after a
        // DNS connection's last answer, so the wait for theirs is short (the default is 5 s).
        http2TLS.shutdownTimeout = .milliseconds(250)
        do {
            self.http2Context = try NIOSSLContext(configuration: http2TLS)
        } catch {
            throw HTTPDNSError(code: .invalidConfiguration, message: "cannot set up TLS: \(error)", source: error)
        }
        let profile = PinnedClientPool.Profile(
            trustRoots: configuration.additionalTrustRoots, connectTimeout: configuration.connectTimeout,
            idleConnectionTimeout: configuration.idleConnectionTimeout, maximumConnectionsPerHost: 8,
            maximumClients: 64)
        try pool.register(profile)
        self.configuration = configuration
        self.pool = pool
        self.ownsPool = ownsPool
        self.profile = profile
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    deinit {
        // A transport dropped without shutdown() still closes its connections: its HTTP/2 connections here, its
        // HTTP/1.1 clients through the pool (which closes them itself when this transport owned it).
        let (http2, open) = state.withLock { state in
            state.isShutdown ? ([], false) : (Array(state.http2.values), true)
        }
        for slot in http2 { Self.close(slot) }
        if open, !ownsPool { pool.unregister(profile) }
    }

    private static func close(_ slot: HTTP2Slot) {
        switch slot {
        case .connecting(_, let attempt): attempt.abandon(shutDown)
        case .ready(_, let connection): connection.channel.close(promise: nil)
        }
    }

    /// What requests after ``shutdown()``, and lookups waiting for a connection it gives up, fail with.
    private static let shutDown = HTTPDNSError(code: .shutdown, message: "the HTTP DNS transport was shut down")

    /// Closes every connection. Connections still being set up are given up at once (one made meanwhile is closed):
    /// the lookups waiting for them fail with `HTTPDNSError.Code.shutdown`, as later requests do. Calling it twice
    /// is harmless.
    public func shutdown() async {
        let (http2, first) = state.withLock { state in
            defer {
                state.isShutdown = true
                state.http2.removeAll()
            }
            return (Array(state.http2.values), !state.isShutdown)
        }
        for slot in http2 {
            switch slot {
            case .connecting(_, let attempt):
                attempt.abandon(Self.shutDown)
                if let connection = try? await attempt.future.get() { try? await connection.channel.close() }
            case .ready(_, let connection):
                try? await connection.channel.close()
            }
        }
        guard first else { return }
        if ownsPool {
            await pool.shutdown()
        } else {
            pool.unregister(profile)
            await pool.waitForClosing()
        }
    }

    /// Sends `request` to `endpoint`, trying its bootstrap addresses in turn.
    ///
    /// Connection failures, timeouts, TLS failures and 5xx answers move on to the next address; any other
    /// response is returned as it is, for the provider to interpret.
    /// - Parameters:
    ///   - point: Where to begin: the first address, or where an exchange sent with no task (``ReadyExchange``)
    ///     left off.
    /// - Throws: `HTTPDNSError` (the last failure, with every address tried in `servers`) or `CancellationError`.
    ///
    /// Like the resolver's helpers that lead here, it runs on its caller's executor (`nonisolated(nonsending)`):
    /// entering a plain nonisolated async function costs the runtime an executor check, about 2 % of a lookup.
    nonisolated(nonsending) package func send(
        _ request: Request, to endpoint: HTTPDNSEndpoint, host: HostName, logger: Logger,
        from point: AddressPoint = AddressPoint()
    ) async throws
        -> Response
    {
        var tried = point.address
        var lastError =
            point.lastError ?? HTTPDNSError(code: .internalError, message: "no address to try", host: host.name)
        for (address, server) in zip(endpoint.targets, endpoint.servers).dropFirst(point.address) {
            try Task.checkCancellation()
            tried += 1
            do {
                let response = try await exchange(
                    request, endpoint: endpoint, address: address, server: server,
                    retries: tried == point.address + 1 ? point.retries : 0)
                if let error = Self.serverError(response, endpoint: endpoint, host: host) {
                    lastError = error
                    logger.debug("HTTP DNS server error, trying the next address", metadata: ["server": "\(server)"])
                    continue
                }
                return response
            } catch let error as CancellationError {
                throw error
            } catch {
                if Task.isCancelled { throw CancellationError() }
                lastError = Self.classify(error, endpoint: endpoint, host: host)
                Self.logFailure(
                    lastError, request: request.loggableSuffix ?? request.suffix, server: server, logger: logger)
            }
        }
        lastError.servers = Array(endpoint.servers.prefix(tried))
        throw lastError
    }

    /// The error a 5xx answer stands for (the next address is tried), `nil` for any other status.
    static func serverError(_ response: Response, endpoint: HTTPDNSEndpoint, host: HostName) -> HTTPDNSError? {
        guard response.status >= 500 else { return nil }
        return HTTPDNSError(
            code: .httpStatus, message: "\(endpoint.url) answered HTTP \(response.status)", host: host.name)
    }

    static func logFailure(_ error: HTTPDNSError, request: String, server: String, logger: Logger) {
        logger.debug(
            "HTTP DNS exchange failed",
            metadata: ["server": "\(server)", "request": "\(request)", "error": "\(error.code)"]
        )
    }

    /// One HTTP exchange under the request timeout: over HTTP/2 when the target offers it, else HTTP/1.1.
    nonisolated(nonsending) private func exchange(
        _ request: Request,
        endpoint: HTTPDNSEndpoint,
        address: IPAddress?,
        server: String,
        retries: Int
    ) async throws -> Response {
        if endpoint.scheme == .https, !endpoint.hostIsIPAddress {
            let key = PinKey(endpoint, address: address)
            do {
                if let response = try await http2Exchange(
                    request, endpoint: endpoint, key: key, server: server, retries: retries)
                {
                    return response
                }
            } catch is HTTP2NotOffered {
                logger.debug("no HTTP/2 in ALPN, using HTTP/1.1", metadata: ["server": "\(server)"])
                state.withLock { _ = $0.http1Only.insert(key) }
            }
        }
        return try await http1Exchange(request, endpoint: endpoint, address: address, server: server)
    }

    /// Sends `count` requests to the endpoint's first address as one batch on its HTTP/2 connection
    /// (``HTTP2DNSConnection/executeAll(count:window:timeout:limit:server:make:)``): at most `window` open at once,
    /// request `index` made by `make` on the connection's event loop when its turn comes.
    /// - Returns: Each outcome in order, `nil` for a request never sent because the connection was lost first; or
    ///   `nil` when the endpoint cannot be asked this way (plain `http`, an IP-literal host, a server without HTTP/2,
    ///   a connection that cannot be made, a transport shut down). Either way ``send(_:to:host:logger:)`` is the
    ///   path for what is left: it tries the other addresses and reports the failure.
    /// - Throws: `CancellationError`.
    nonisolated(nonsending) package func sendAll(
        count: Int, window: Int, to endpoint: HTTPDNSEndpoint, make: @escaping @Sendable (Int) -> Request
    ) async throws -> [Result<Response, any Error>?]? {
        guard endpoint.scheme == .https, !endpoint.hostIsIPAddress, let address = endpoint.targets.first,
            let server = endpoint.servers.first
        else { return nil }
        let key = PinKey(endpoint, address: address)
        let connection: HTTP2DNSConnection?
        do {
            connection = try await http2Connection(for: key, endpoint: endpoint)
        } catch {
            if error is HTTP2NotOffered { state.withLock { _ = $0.http1Only.insert(key) } }
            try Task.checkCancellation()
            return nil
        }
        return try await connection?.executeAll(
            count: count, window: window, timeout: configuration.requestTimeout,
            limit: configuration.maximumResponseBytes, server: server, make: make)
    }

    /// One exchange on the target's HTTP/2 connection. When the connection is lost before the answer (a GOAWAY that
    /// leaves the stream out, a refused stream, a closed connection), it goes again on a new connection, up to three
    /// times: HTTP DNS queries have no side effects, and a server that restarts or limits requests per connection
    /// must not fail the lookups in flight (`retries` were spent before this call). `nil` when the target is known to
    /// offer only HTTP/1.1.
    nonisolated(nonsending) private func http2Exchange(
        _ request: Request, endpoint: HTTPDNSEndpoint, key: PinKey, server: String, retries: Int
    ) async throws
        -> Response?
    {
        var attempt = retries
        while true {
            guard let connection = try await http2Connection(for: key, endpoint: endpoint) else { return nil }
            do {
                return try await connection.execute(
                    request, timeout: configuration.requestTimeout, limit: configuration.maximumResponseBytes,
                    server: server)
            } catch let error as HTTP2ConnectionLost where error.retryable && attempt < 3 {
                attempt += 1
                logger.debug(
                    "HTTP/2 connection lost, retrying on a new one",
                    metadata: ["server": "\(server)", "error": "\(error)"])
            }
        }
    }

    /// The target's usable HTTP/2 connection, made on first use; concurrent first requests share one attempt.
    /// `nil` when the target is known to offer only HTTP/1.1. The usual case, a ready connection, takes one lock
    /// and one look-up.
    nonisolated(nonsending) private func http2Connection(for key: PinKey, endpoint: HTTPDNSEndpoint) async throws
        -> HTTP2DNSConnection?
    {
        while true {
            let slot: HTTP2Slot? = try state.withLock { state in
                guard !state.isShutdown else { throw Self.shutDown }
                if let slot = state.http2[key] {
                    if case .ready(_, let connection) = slot, !connection.isUsable {
                        state.http2[key] = nil
                    } else {
                        return slot
                    }
                }
                if state.http1Only.contains(key) { return nil }
                state.nextSlotID += 1
                let attempt = HTTP2DNSConnection.connect(
                    endpoint: endpoint, address: key.address, sslContext: http2Context, group: eventLoopGroup,
                    timeout: configuration.connectTimeout, idleTimeout: configuration.idleConnectionTimeout,
                    maximumResponseBytes: configuration.maximumResponseBytes)
                let slot = HTTP2Slot.connecting(id: state.nextSlotID, attempt)
                state.http2[key] = slot
                return slot
            }
            switch slot {
            case nil:
                return nil
            case .ready(_, let connection):
                return connection
            case .connecting(let id, let attempt):
                let connection: HTTP2DNSConnection
                do {
                    // A cancelled lookup leaves at once; the attempt goes on for the others and the next caller.
                    connection = try await CancellableWait<HTTP2DNSConnection>.value { wait in
                        attempt.future.whenComplete { wait.finish($0.mapError { $0 }) }
                    }
                } catch let error as CancellationError {
                    throw error
                } catch {
                    state.withLock { state in if state.http2[key]?.id == id { state.http2[key] = nil } }
                    throw error
                }
                let installed = state.withLock { state in
                    guard case .connecting(id, _)? = state.http2[key] else { return false }
                    state.http2[key] = .ready(id: id, connection)
                    return true
                }
                if installed {
                    // The state, not the transport, is captured: a weak reference would give the transport a side
                    // table, and every retain and release of it (several per lookup) would take the slow path.
                    let state = self.state
                    connection.channel.closeFuture.whenComplete { _ in
                        state.withLock { state in if state.http2[key]?.id == id { state.http2[key] = nil } }
                    }
                }
                if connection.isUsable { return connection }
            }
        }
    }

    /// One HTTP/1.1 exchange through AsyncHTTPClient under the request timeout.
    private func http1Exchange(
        _ request: Request,
        endpoint: HTTPDNSEndpoint,
        address: IPAddress?,
        server: String
    ) async throws -> Response {
        let lease: PinnedClientPool.Lease
        do {
            guard !state.withLock({ $0.isShutdown }) else { throw PinnedClientPool.Closed() }
            lease = try pool.acquire(.init(host: endpoint.host, address: address), profile: profile)
        } catch {
            throw Self.shutDown
        }
        defer { pool.release(lease) }
        let client = lease.client
        var httpRequest = HTTPClientRequest(url: endpoint.url + request.suffix)
        httpRequest.method = request.method
        for (name, value) in request.headers { httpRequest.headers.add(name: name, value: value) }
        httpRequest.headers.replaceOrAdd(name: "User-Agent", value: "swift-httpdns")
        if let body = request.body {
            httpRequest.body = .bytes(ByteBuffer(bytes: body))
            httpRequest.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        }
        let limit = configuration.maximumResponseBytes
        let timeout = configuration.requestTimeout
        let requestCopy = httpRequest
        return try await withTimeLimit(
            timeout, orThrow: HTTPDNSError(code: .timeout, message: "no complete HTTP answer within \(timeout)")
        ) {
            let response = try await client.execute(requestCopy, timeout: TimeAmount(timeout))
            if let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length > limit {
                throw NIOTooManyBytesError(maxBytes: limit)
            }
            let body = try await response.body.collect(upTo: limit)
            return Response(
                status: Int(response.status.code),
                contentType: response.headers.first(name: "Content-Type"),
                body: Array(buffer: body),
                server: server
            )
        }
    }
}
