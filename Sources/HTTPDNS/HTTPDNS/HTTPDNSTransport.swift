import AsyncHTTPClient
public import Logging
public import NIOCore
import NIOHTTP1
public import NIOPosix
package import NIOSSL
import Synchronization

/// The HTTP client shared by every HTTP DNS resolver: connection pools, TLS trust, timeouts, bootstrap pinning.
///
/// Built on AsyncHTTPClient. Connections to an endpoint with bootstrap addresses are pinned with the client's
/// `dnsOverride`, so the TCP connection goes to the bootstrap IP while SNI and the certificate check use the
/// endpoint's real host name. Certificates are always verified; ``Configuration/additionalTrustRoots`` adds
/// private CAs to the system roots and there is no way to turn verification off.
///
/// HTTP/2 is used when the server offers it over TLS (ALPN), so concurrent lookups share one connection.
/// A connection that cannot be made (refused, unreachable, a certificate that does not verify) fails the exchange
/// at once instead of being retried until the connect timeout, so the next bootstrap address, the next endpoint or
/// the next source is asked without delay.
/// Call ``shutdown()`` when done; it closes every connection.
public final class HTTPDNSTransport: Sendable {
    /// Transport settings.
    public struct Configuration: Sendable {
        /// The time one HTTP exchange may take, from sending the request to the last byte of the body
        /// (default 5 s). A server that stalls, even one that drips bytes, fails with ``DNSError/Code/timeout``.
        public var requestTimeout: Duration
        /// The time a TCP connect plus TLS handshake may take (default 2 s).
        public var connectTimeout: Duration
        /// PEM files with extra trusted CA certificates, added to the system roots (for private CAs).
        public var additionalTrustRoots: [String]
        /// Larger response bodies fail with ``DNSError/Code/responseTooLarge`` (default 64 KiB).
        public var maximumResponseBytes: Int
        /// How long an idle connection is kept open for reuse (default 60 s).
        public var idleConnectionTimeout: Duration

        /// Creates a configuration; every parameter has the documented default.
        public init(
            requestTimeout: Duration = .seconds(5),
            connectTimeout: Duration = .seconds(2),
            additionalTrustRoots: [String] = [],
            maximumResponseBytes: Int = 65_536,
            idleConnectionTimeout: Duration = .seconds(60)
        ) {
            self.requestTimeout = requestTimeout
            self.connectTimeout = connectTimeout
            self.additionalTrustRoots = additionalTrustRoots
            self.maximumResponseBytes = maximumResponseBytes
            self.idleConnectionTimeout = idleConnectionTimeout
        }

        /// The defaults.
        public static var `default`: Configuration { Configuration() }
    }

    /// One HTTP request relative to an endpoint's base URL.
    struct Request: Sendable {
        var method: HTTPMethod = .GET
        /// Appended to the endpoint's base URL: a path and/or query, e.g. `?dns=…` or `/123/d?host=…`.
        var suffix: String
        var headers: [(String, String)] = []
        var body: [UInt8]? = nil
        /// A redacted form of `suffix` for logs and errors, when `suffix` carries something sensitive.
        var loggableSuffix: String? = nil
    }

    /// A response with its whole body.
    struct Response: Sendable {
        var status: Int
        var contentType: String?
        var body: [UInt8]
        /// The address the response came from, `IP:PORT` or `host:port`.
        var server: String
    }

    /// Which pinned client serves a connection target.
    private struct PinKey: Hashable {
        var host: String
        var address: IPAddress?
    }

    private struct State {
        var clients: [PinKey: HTTPClient] = [:]
        var isShutdown = false
    }

    /// The settings this transport was created with.
    public let configuration: Configuration
    private let tlsConfiguration: TLSConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let state = Locked(State())
    private let logger: Logger

    /// Creates a transport.
    /// - Parameters:
    ///   - configuration: Timeouts, trust roots, size cap.
    ///   - eventLoopGroup: The NIO event loops to run connections on (default: the shared singleton).
    ///   - logger: For connection-level events; request logs go to the resolver's logger.
    /// - Throws: ``DNSError/Code/invalidConfiguration`` when a trust-root file cannot be read or holds no
    ///   certificate, or a timeout is not positive.
    public init(
        configuration: Configuration = .default,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "httpdns.transport", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(DNSError) {
        guard configuration.requestTimeout > .zero, configuration.connectTimeout > .zero,
            configuration.maximumResponseBytes > 0
        else {
            throw DNSError(code: .invalidConfiguration, message: "HTTP DNS timeouts and size cap must be positive")
        }
        let tls = try TLSConfiguration.verifiedClient(additionalTrustRoots: configuration.additionalTrustRoots)
        self.configuration = configuration
        self.tlsConfiguration = tls
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    deinit {
        // AsyncHTTPClient requires an explicit shutdown; a transport dropped without one still closes its
        // connections. The clients stay alive until their shutdown completes.
        let clients = state.withLock { state in state.isShutdown ? [] : Array(state.clients.values) }
        for client in clients { client.shutdown { _ in } }
    }

    /// Closes every connection. Later requests fail with ``DNSError/Code/shutdown``. Calling it twice is harmless.
    public func shutdown() async {
        let clients = state.withLock { state in
            state.isShutdown = true
            defer { state.clients.removeAll() }
            return Array(state.clients.values)
        }
        for client in clients {
            do { try await client.shutdown() } catch { logger.debug("HTTP client shutdown: \(error)") }
        }
    }

    /// Sends `request` to `endpoint`, trying its bootstrap addresses in turn.
    ///
    /// Connection failures, timeouts, TLS failures and 5xx answers move on to the next address; any other
    /// response is returned as it is, for the provider to interpret.
    /// - Throws: ``DNSError`` (the last failure, with every address tried in `servers`) or `CancellationError`.
    func send(_ request: Request, to endpoint: HTTPDNSEndpoint, host: HostName, logger: Logger) async throws -> Response {
        let targets: [IPAddress?] = endpoint.bootstrapAddresses.isEmpty ? [nil] : endpoint.bootstrapAddresses
        var tried: [String] = []
        var lastError = DNSError(code: .internalError, message: "no address to try", host: host.name)
        for address in targets {
            try Task.checkCancellation()
            let server = address.map { "\($0.urlHost):\(endpoint.port)" } ?? "\(endpoint.host):\(endpoint.port)"
            tried.append(server)
            do {
                let response = try await exchange(request, endpoint: endpoint, address: address, server: server)
                if response.status >= 500 {
                    lastError = DNSError(
                        code: .httpStatus,
                        message: "\(endpoint.url) answered HTTP \(response.status)",
                        host: host.name
                    )
                    logger.debug("HTTP DNS server error, trying the next address", metadata: ["server": "\(server)"])
                    continue
                }
                return response
            } catch let error as CancellationError {
                throw error
            } catch {
                if Task.isCancelled { throw CancellationError() }
                lastError = Self.classify(error, endpoint: endpoint, host: host)
                logger.debug(
                    "HTTP DNS exchange failed",
                    metadata: [
                        "server": "\(server)", "request": "\(request.loggableSuffix ?? request.suffix)",
                        "error": "\(lastError.code)",
                    ]
                )
            }
        }
        lastError.servers = tried
        throw lastError
    }

    /// One HTTP exchange under the request timeout.
    private func exchange(
        _ request: Request,
        endpoint: HTTPDNSEndpoint,
        address: IPAddress?,
        server: String
    ) async throws -> Response {
        let client = try client(for: endpoint, address: address)
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
        return try await withTimeLimit(timeout, orThrow: DNSError(code: .timeout, message: "no complete HTTP answer within \(timeout)")) {
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

    /// The client for a connection target, created on first use.
    private func client(for endpoint: HTTPDNSEndpoint, address: IPAddress?) throws -> HTTPClient {
        let key = PinKey(host: endpoint.host, address: address)
        return try state.withLock { state in
            guard !state.isShutdown else {
                throw DNSError(code: .shutdown, message: "the HTTP DNS transport was shut down")
            }
            if let client = state.clients[key] { return client }
            var configuration = HTTPClient.Configuration(
                tlsConfiguration: tlsConfiguration,
                redirectConfiguration: .disallow,
                timeout: .init(connect: TimeAmount(self.configuration.connectTimeout)),
                connectionPool: .init(idleTimeout: TimeAmount(self.configuration.idleConnectionTimeout)),
                proxy: nil,
                decompression: .disabled
            )
            configuration.httpVersion = .automatic
            // AsyncHTTPClient would retry a failed connect with backoff until the connect timeout: a refused
            // bootstrap address or a bad certificate would hold up failover for that long.
            configuration.connectionPool.retryConnectionEstablishment = false
            if let address { configuration.dnsOverride = [endpoint.host: address.description] }
            let client = HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration, backgroundActivityLogger: logger)
            state.clients[key] = client
            return client
        }
    }

    /// Maps an error from the HTTP stack to a ``DNSError``.
    static func classify(_ error: any Error, endpoint: HTTPDNSEndpoint, host: HostName) -> DNSError {
        func make(_ code: DNSError.Code, _ message: String) -> DNSError {
            DNSError(code: code, message: "\(endpoint.url): \(message)", host: host.name, source: error)
        }
        switch error {
        case var error as DNSError:
            error.host = host.name
            if error.code == .timeout { error.message = "\(endpoint.url): \(error.message)" }
            return error
        case is NIOTooManyBytesError:
            return make(.responseTooLarge, "the response body is larger than the cap")
        case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError:
            return make(.tlsFailure, "TLS failed: \(error)")
        case let error as HTTPClientError:
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .tlsHandshakeTimeout,
                .getConnectionFromPoolTimeout:
                return make(.timeout, "no answer in time (\(error))")
            default:
                return make(.transportFailure, "HTTP exchange failed: \(error)")
            }
        case ChannelError.connectTimeout:
            return make(.timeout, "connect timed out")
        default:
            return make(.transportFailure, "cannot reach the server: \(error)")
        }
    }
}

extension TLSConfiguration {
    /// A client configuration that verifies certificates fully, with the CA certificates in the PEM files at
    /// `additionalTrustRoots` added to the system roots. Shared by every HTTP client of the package; there is
    /// deliberately no way to turn verification off.
    /// - Throws: ``DNSError/Code/invalidConfiguration`` when a file cannot be read or holds no certificate.
    package static func verifiedClient(additionalTrustRoots: [String]) throws(DNSError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        // TLS 1.0 and 1.1 are deprecated (RFC 8996): never offered, for HTTP DNS and intercepted traffic alike.
        tls.minimumTLSVersion = .tlsv12
        var extraRoots: [NIOSSLCertificate] = []
        for path in additionalTrustRoots {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(path)
            } catch {
                throw DNSError(code: .invalidConfiguration, message: "cannot read trust root file \(path): \(error)", source: error)
            }
            guard !certificates.isEmpty else {
                throw DNSError(code: .invalidConfiguration, message: "trust root file \(path) holds no certificate")
            }
            extraRoots += certificates
        }
        if !extraRoots.isEmpty { tls.additionalTrustRoots = [.certificates(extraRoots)] }
        return tls
    }
}

/// Runs `operation`, throwing `error` if it takes longer than `limit` (the operation is cancelled then). Shared by
/// the package's HTTP clients, whose peers can stall mid-body, and by the URL protocol's resolution step.
///
/// The timer is a NIO scheduled task, cancelled (and freed) as soon as the operation ends. A `Task.sleep` racing
/// the operation would not do: on Linux a cancelled sleep keeps its timer, and the memory it holds, until its
/// deadline, so at thousands of requests a second with a 60 s limit hundreds of thousands of dead timers pile up
/// (the soak test saw resident memory grow by 430 MB over a million requests).
package func withTimeLimit<T: Sendable>(
    _ limit: Duration,
    orThrow timeoutError: @autoclosure @escaping @Sendable () -> any Error,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await operation() }
    let expiry = TimeLimitExpiry()
    let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(limit)) {
        expiry.expired.store(true, ordering: .releasing)
        work.cancel()
    }
    defer { timer.cancel() }
    do {
        return try await withTaskCancellationHandler {
            try await work.value
        } onCancel: {
            work.cancel()
        }
    } catch {
        if expiry.expired.load(ordering: .acquiring) { throw timeoutError() }
        throw error
    }
}

/// Whether a ``withTimeLimit(_:orThrow:_:)`` timer fired, shared between the timer and the waiting task.
private final class TimeLimitExpiry: Sendable {
    let expired = Atomic<Bool>(false)
}
