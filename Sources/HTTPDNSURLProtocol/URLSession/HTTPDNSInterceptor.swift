#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif
public import CoreMetrics
public import Foundation
public import HTTPDNS
public import Logging
import AsyncHTTPClient
import NIOHTTP1
public import NIOCore
public import NIOPosix
import Synchronization
import HTTPDNSCore

/// The engine behind ``HTTPDNSURLProtocol``: resolves a request's host to its ranked IPs through a
/// `HostResolver`, sends the request to the best one (failing over to the next ones when a connection cannot be
/// made), follows redirects itself (each hop resolved again), and feeds connect latency and failures back to the
/// scored cache.
///
/// TLS is checked against the real host: the request goes through AsyncHTTPClient pinned to the chosen IP, so SNI
/// and the certificate name are the URL's host while TCP goes to the IP. Certificates are always verified; extra
/// trust roots may be added, nothing turns verification off.
///
/// Use it through URLSession (``HTTPDNSURLProtocol/register(_:)``) or directly with ``load(_:)``.
public final class HTTPDNSInterceptor: Sendable {
    /// An answer, as URLSession callers receive it.
    public struct Response: Sendable {
        /// The response under the real host's URL (the last hop's), so cookies and caches see the real host.
        public var response: HTTPURLResponse
        /// The whole body.
        public var body: Data
        /// What happened on the way.
        public var trace: RequestTrace
    }

    /// The resolver requests are resolved through.
    public let resolver: HostResolver
    /// The settings in effect (those it was created with, as changed by a settings reload).
    public var configuration: Configuration { live.withLock { $0 } }
    private let live: Locked<Configuration>
    private let engine: ExchangeEngine
    let loadExecutors: LoadExecutors
    var transport: PinnedTransport { engine.transport }
    private var logger: Logger { engine.logger }
    private var metrics: InterceptionMetrics { engine.metrics }

    /// Creates an interceptor.
    /// - Parameters:
    ///   - resolver: Resolves hosts to ranked IPs and receives connect feedback.
    ///   - configuration: Scope, redirects, failover, limits, trust roots, cookies.
    ///   - eventLoopGroup: The event loops every pinned client shares (default: the NIO singleton).
    ///   - logger: For per-request events (debug and trace levels); the library never bootstraps logging.
    ///   - metricsFactory: Where `httpdns_intercepted_requests{outcome}`, `httpdns_failovers` and
    ///     `httpdns_redirects` go (default: the bootstrapped factory).
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for an unreadable trust-root file or a limit that
    ///   is not positive.
    public init(
        resolver: HostResolver,
        configuration: Configuration = Configuration(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "httpdns.urlprotocol", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(HTTPDNSError) {
        guard configuration.maximumRequestBodyBytes > 0, configuration.maximumResponseBytes > 0 else {
            throw HTTPDNSError(code: .invalidConfiguration, message: "interceptor body limits must be positive")
        }
        self.resolver = resolver
        self.live = Locked(configuration)
        self.loadExecutors = LoadExecutors(eventLoopGroup)
        self.engine = try ExchangeEngine(
            resolver: resolver, policy: configuration.connection, eventLoopGroup: eventLoopGroup, logger: logger,
            metricsFactory: metricsFactory)
    }

    /// Whether the URL protocol takes `request`: http or https, not tagged handled, a host inside the scope (IP
    /// literals and `localhost` only when an override names them), and not sent through a proxy by the environment
    /// unless ``Configuration/proxyMode`` tunnels such requests.
    public func intercepts(_ request: URLRequest) -> Bool {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            !RequestRewriting.isHandled(request), let host = RequestRewriting.host(of: url)
        else { return false }
        let configuration = self.configuration
        if let proxy = configuration.proxies.proxy(for: url) {
            // Only HTTP proxies can be tunnelled here; any other kind stays URLSession's.
            return configuration.proxyMode == .tunnel && proxy.scheme == "http"
        }
        return configuration.connection.scope.intercepts(host: host, overrides: resolver.overrides)
    }

    /// Follows edited settings: the interception scope, the connection race, the proxy mode and the environment's
    /// proxies (read again). Trust roots, timeouts and limits keep their values until the interceptor is made again.
    func apply(_ edited: Configuration) {
        live.withLock { $0.follow(edited) }
    }

    /// Loads `request`: resolves, rewrites, sends with failover, follows redirects, handles cookies.
    ///
    /// The body is collected whole (up to ``Configuration/maximumResponseBytes``). A hop's time limit is the
    /// request's `timeoutInterval`, covering connect, sending and the whole answer.
    /// - Throws: `HTTPDNSError`; `HTTPDNSError.Code.cancelled` when the task is cancelled.
    public func load(_ request: URLRequest) async throws(HTTPDNSError) -> Response {
        try await load(request, willRedirect: nil)
    }

    /// ``load(_:)`` with `willRedirect` asked before each redirect is followed.
    func load(_ request: URLRequest, willRedirect: RedirectHook?) async throws(HTTPDNSError) -> Response {
        let started = ContinuousClock.now
        var trace = Self.trace(of: request)
        let transport = self.transport
        // One snapshot for the whole request: each read of the property takes the lock and copies the settings.
        let configuration = self.configuration
        let limit = configuration.maximumResponseBytes
        do {
            let (response, answer) = try await run(
                request, configuration: configuration, willRedirect: willRedirect, trace: &trace
            ) {
                exchange, connection, deadline in
                let streamed = try await transport.stream(exchange, deadline: deadline, connection: connection)
                let response = try await PinnedTransport.collect(streamed, limit: limit)
                return (response, response.headLatency)
            }
            let body = answer.body.withUnsafeReadableBytes { Data($0) }
            trace.status = response.statusCode
            trace.bytes = body.count
            trace.elapsed = ContinuousClock.now - started
            metrics.succeeded.increment()
            configuration.connection.traceHandler?(trace)
            return Response(response: response, body: body, trace: trace)
        } catch {
            engine.reportFailure(error, trace: &trace, started: started, handler: configuration.connection.traceHandler)
            throw error
        }
    }

    /// An empty trace for `request`: its URL without credentials, and its trace tag.
    private static func trace(of request: URLRequest) -> RequestTrace {
        RequestTrace(
            url: Redaction.url(request.url?.absoluteString ?? ""), hops: [], status: nil, bytes: 0, elapsed: .zero,
            tag: request.value(forHTTPHeaderField: RequestTrace.tagHeader))
    }

    /// Asked before each redirect is followed, after ``Configuration/redirectHandler``: the next request, changed, or
    /// `nil` to deliver the 3xx as it is. The URL protocol passes a session delegate's
    /// `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)` through it.
    typealias RedirectHook = @Sendable (HTTPURLResponse, URLRequest) async -> URLRequest?

    /// An answer whose body is still arriving.
    struct StreamedAnswer: Sendable {
        /// The response under the real host's URL (the last hop's).
        var response: HTTPURLResponse
        /// The body, as it arrives (with back-pressure); the request's time limit covers it. Its end, or an error,
        /// completes the trace.
        var body: HTTPClientResponse.Body
    }

    /// Loads `request` as ``load(_:)`` does (resolution, failover, redirects, cookies), but returns at the last
    /// hop's response head and hands the body over as it arrives, without a size limit: nothing is kept.
    ///
    /// Failover ends at the response head: a body that fails midway is an error of the request, never sent again.
    /// - Throws: `HTTPDNSError`; `HTTPDNSError.Code.cancelled` when the task is cancelled.
    func stream(_ request: URLRequest, willRedirect: RedirectHook?) async throws(HTTPDNSError) -> StreamedAnswer {
        let started = ContinuousClock.now
        var trace = Self.trace(of: request)
        let transport = self.transport
        let configuration = self.configuration
        do {
            let (response, answer) = try await run(
                request, configuration: configuration, willRedirect: willRedirect, trace: &trace
            ) {
                exchange, connection, deadline in
                let streamed = try await transport.stream(exchange, deadline: deadline, connection: connection)
                return (StreamedHop(streamed: streamed), streamed.headLatency)
            }
            trace.status = response.statusCode
            engine.reportWhenBodyEnds(
                answer.streamed, trace: trace, started: started, handler: configuration.connection.traceHandler)
            return StreamedAnswer(response: response, body: answer.streamed.response.body)
        } catch {
            engine.reportFailure(error, trace: &trace, started: started, handler: configuration.connection.traceHandler)
            throw error
        }
    }

    /// How many pinned (host, IP) clients with this front's client settings (trust roots, timeouts, limits) are
    /// open now, at most `ConnectionPolicy.maximumPinnedClients`. The clients come from the resolver's pool: HTTP DNS
    /// and other fronts on the same resolver with the same settings use the same ones.
    package var pinnedClientCount: Int { transport.clientCount }

    /// Gives up this front's pinned clients: closed unless another user of the resolver's pool shares their
    /// settings (the resolver's own shutdown closes every one). Later loads fail with `HTTPDNSError.Code.shutdown`.
    public func shutdown() async {
        await transport.shutdown()
    }

    // MARK: - Hops

    /// Sends one attempt of a hop: the exchange pinned to its address, on the race's connection when it won one.
    private typealias Perform<Answer> =
        @Sendable (PinnedTransport.Exchange, DialedConnection?, NIODeadline) async throws -> (Answer, Duration)

    /// Runs the hops of `original` (redirects followed per the configuration), each sent through `perform` pinned to
    /// an address, and returns the last hop's answer with its response under the real host's URL.
    private func run<Answer: HopAnswer>(
        _ original: URLRequest, configuration: Configuration, willRedirect: RedirectHook?, trace: inout RequestTrace,
        perform: @escaping Perform<Answer>
    ) async throws(HTTPDNSError) -> (HTTPURLResponse, Answer) {
        var body = try Self.readBody(of: original, limit: configuration.maximumRequestBodyBytes)
        var hop = original
        RequestRewriting.clearHandled(&hop)
        var redirects = 0
        while true {
            // A URL without a host is refused by `send`, where the hop's target is read.
            guard let url = hop.url else {
                throw HTTPDNSError(code: .badURL, message: "the request has no URL", url: nil)
            }
            guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw HTTPDNSError(
                    code: .unsupportedURL, message: "only http and https are handled", url: url.absoluteString)
            }
            var sent = hop
            Self.addCookies(to: &sent, for: url, from: configuration.cookieStorage)
            let answer = try await send(
                sent, body: body, url: url, configuration: configuration, trace: &trace, perform: perform)
            await Self.storeCookies(from: answer.headers, for: url, request: hop, in: configuration.cookieStorage)
            if configuration.connection.followRedirects,
                var next = try RedirectRule.next(
                    after: hop, body: body, status: answer.status,
                    location: answer.headers.first(name: "Location"), from: url),
                let followed = try await Self.redirect(
                    to: next.request, from: url, answer: answer, configuration: configuration,
                    willRedirect: willRedirect)
            {
                next.request = followed
                redirects += 1
                guard redirects <= configuration.connection.maximumRedirects else {
                    throw HTTPDNSError(
                        code: .tooManyRedirects,
                        message: "more than \(configuration.connection.maximumRedirects) redirects",
                        url: original.url?.absoluteString
                    )
                }
                metrics.redirects.increment()
                await answer.discard()
                hop = next.request
                body = next.body
                continue
            }
            guard
                let response = HTTPURLResponse(
                    url: url,
                    statusCode: answer.status,
                    httpVersion: answer.version,
                    headerFields: Self.headerFields(answer.headers)
                )
            else {
                throw HTTPDNSError(
                    code: .badResponse, message: "cannot represent the answer", url: url.absoluteString)
            }
            return (response, answer)
        }
    }

    /// Sends one hop: resolves its host (when in scope) and tries the ranked addresses in turn.
    private func send<Answer: HopAnswer>(
        _ request: URLRequest, body: ByteBuffer?, url: URL, configuration: Configuration, trace: inout RequestTrace,
        perform: @escaping Perform<Answer>
    ) async throws(HTTPDNSError) -> Answer {
        guard let target = HopTarget(url) else {
            throw HTTPDNSError(
                code: .badURL, message: "the URL has no host", url: Redaction.url(url.absoluteString))
        }
        let method = (request.httpMethod ?? "GET").uppercased()
        let urlText = url.absoluteString
        var hop = RequestTrace.Hop(
            url: Redaction.url(urlText), method: method, hostHeader: target.hostHeader,
            address: nil, freshness: nil, status: nil, failedAttempts: [], resolveTime: .zero, elapsed: .zero)
        defer { trace.hops.append(hop) }

        // The request's timeoutInterval covers the whole hop: resolution, the connection race, connect and exchange.
        let timeout =
            request.timeoutInterval > 0 && request.timeoutInterval.isFinite ? min(request.timeoutInterval, 86_400) : 60
        let budget = Duration.seconds(fractional: timeout)
        let deadline = NIODeadline.now() + TimeAmount(budget)
        let proxy = configuration.proxyMode == .tunnel ? configuration.proxies.proxy(for: url) : nil
        let spans = HopSpans(policy: configuration.connection, method: method, url: url, target: target)
        let response: Answer
        do {
            let candidates = try await engine.candidates(
                target, url: urlText, resolve: proxy == nil, policy: configuration.connection,
                budget: budget, deadline: deadline, spans: spans, hop: &hop)
            // Built once for the hop, from the request as the application wrote it; each attempt only pins the
            // client to its address (the URL keeps the real host, which gives the Host header and SNI).
            var exchange = try PinnedTransport.Exchange(request, body: body)
            exchange.proxy = proxy
            response = try await engine.attempt(
                candidates, method: method, url: urlText, deadline: deadline, spans: spans, hop: &hop
            ) { address, connection in
                var pinned = exchange
                if let address { pinned.address = address }
                return try await perform(pinned, connection, deadline)
            }
        } catch {
            spans.end(hop, error: error)
            throw error
        }
        hop.status = response.status
        spans.end(hop, error: nil)
        logger.trace(
            "intercepted hop",
            metadata: ["url": "\(urlText)", "ip": "\(hop.address?.description ?? "-")", "status": "\(response.status)"])
        return response
    }

    // MARK: - Bodies, headers, cookies

    /// The request body: `httpBody`, or the whole `httpBodyStream` up to `limit` bytes, in the buffer that goes on
    /// the wire.
    static func readBody(of request: URLRequest, limit: Int) throws(HTTPDNSError) -> ByteBuffer? {
        if let body = request.httpBody { return ByteBuffer(bytes: body) }
        guard let stream = request.httpBodyStream else { return nil }
        stream.open()
        defer { stream.close() }
        var body = ByteBuffer()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: $0.count) }
            if count < 0 {
                throw HTTPDNSError(
                    code: .invalidRequest,
                    message: "the request body stream failed: \(stream.streamError.map { "\($0)" } ?? "read error")",
                    url: request.url?.absoluteString)
            }
            if count == 0 { break }
            guard body.readableBytes + count <= limit else {
                throw HTTPDNSError(
                    code: .requestBodyTooLarge, message: "the request body stream is larger than \(limit) bytes",
                    url: request.url?.absoluteString)
            }
            body.writeBytes(chunk[0..<count])
        }
        return body
    }

    /// Response headers as Foundation's dictionary: repeated names joined with ", ", the first spelling kept.
    static func headerFields(_ headers: HTTPHeaders) -> [String: String] {
        var fields: [String: String] = [:]
        var spelling: [String: String] = [:]
        for (name, value) in headers {
            let key = name.lowercased()
            if let existing = spelling[key] {
                fields[existing] = fields[existing].map { "\($0), \(value)" } ?? value
            } else {
                spelling[key] = name
                fields[name] = value
            }
        }
        return fields
    }

    /// Applies the redirect policy: an `https` to `http` hop is refused unless allowed; the application's handler may
    /// change the next request or stop (`nil`: the 3xx answer is delivered), and so may `willRedirect` after it.
    private static func redirect(
        to next: URLRequest, from url: URL, answer: some HopAnswer, configuration: Configuration,
        willRedirect: RedirectHook?
    ) async throws(HTTPDNSError) -> URLRequest? {
        try RedirectRule.checkDowngrade(
            from: url, to: next.url, allowed: configuration.connection.allowsInsecureRedirects)
        guard configuration.redirectHandler != nil || willRedirect != nil,
            let response = HTTPURLResponse(
                url: url, statusCode: answer.status, httpVersion: answer.version,
                headerFields: Self.headerFields(answer.headers))
        else { return next }
        var request: URLRequest? = next
        if let handler = configuration.redirectHandler, let proposed = request { request = handler(response, proposed) }
        if let willRedirect, let proposed = request { request = await willRedirect(response, proposed) }
        return request
    }
}

/// One hop's answer, whichever way its body is read: collected whole, or streaming.
protocol HopAnswer: Sendable {
    var status: Int { get }
    var version: String { get }
    var headers: HTTPHeaders { get }
    /// Gives the body of a redirect that is followed up, so its connection can serve the next hop.
    func discard() async
}

extension PinnedTransport.Response: HopAnswer {
    func discard() async {}
}

/// A hop answered with its body still to be read.
struct StreamedHop: HopAnswer {
    var streamed: PinnedTransport.StreamedResponse
    var status: Int { Int(streamed.response.status.code) }
    var version: String { "HTTP/\(streamed.response.version.major).\(streamed.response.version.minor)" }
    var headers: HTTPHeaders { streamed.response.headers }

    /// Reads and drops a little of the body (a redirect's is short), then ends the lease.
    func discard() async {
        var left = 64 * 1024
        do {
            for try await part in streamed.response.body {
                left -= part.readableBytes
                if left <= 0 { break }
            }
        } catch {}
        streamed.lease.end()
    }
}
