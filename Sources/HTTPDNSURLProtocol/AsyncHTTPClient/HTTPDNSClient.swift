public import AsyncHTTPClient
public import CoreMetrics
import Foundation
public import HTTPDNS
public import Logging
public import NIOCore
import NIOHTTP1
public import NIOPosix
import HTTPDNSCore

/// AsyncHTTPClient with the fastest address: executes an `HTTPClientRequest` like `HTTPClient.execute` does, through
/// the same exchange engine as the URL protocol.
///
/// Each hop's host is resolved through a `HostResolver` to its ranked addresses; the request goes to the best
/// one on a client pinned to it, with SNI and the certificate checked for the real host and the `Host` header
/// naming it. A connection that cannot be made fails over to the next address (a request that may have been sent
/// only when its method is idempotent); redirects are followed here, each hop resolved again; connect and
/// first-byte times and failures go back to the scores. The body streams: `execute` returns at the response head.
///
/// ```swift
/// let client = try HTTPDNSClient(resolver: resolver)
/// var request = HTTPClientRequest(url: "https://api.example.com/orders")
/// request.headers.add(name: "Accept", value: "application/json")
/// let response = try await client.execute(request, timeout: .seconds(30))
/// for try await part in response.body { consume(part) }
/// try await client.shutdown()
/// ```
///
/// It mirrors `HTTPClient`'s async API, so switching is a one-line change. What differs: certificates are always
/// verified (a request's own `tlsConfiguration` is refused, use `ConnectionPolicy.additionalTrustRoots`), and
/// redirects follow the URL protocol's rules (`ConnectionPolicy.followRedirects`).
public final class HTTPDNSClient: Sendable {
    /// Client settings: the ``ConnectionPolicy`` the URL protocol's interceptor also holds (scope, redirects,
    /// failover, the race, timeouts, trust roots, client limits, traces); every property has a documented default,
    /// and `Configuration(configReader:)` reads the `interception` keys (from a settings file:
    /// `settings.read(HTTPDNSInterceptor.Configuration.section).connection`). Hosts outside its scope go to
    /// an unpinned client that resolves them itself, as `HTTPClient` would.
    public typealias Configuration = ConnectionPolicy

    /// The resolver hosts are resolved through.
    public let resolver: HostResolver
    /// The settings the client was made with.
    public let configuration: Configuration
    private let engine: ExchangeEngine
    private var transport: PinnedTransport { engine.transport }
    private var logger: Logger { engine.logger }
    private var metrics: InterceptionMetrics { engine.metrics }

    /// Creates a client.
    /// - Parameters:
    ///   - resolver: Resolves hosts to ranked IPs and receives connect feedback.
    ///   - configuration: Scope, redirects, failover, limits, trust roots.
    ///   - eventLoopGroup: The event loops every pinned client shares (default: the NIO singleton).
    ///   - logger: For per-request events (debug and trace levels); the library never bootstraps logging.
    ///   - metricsFactory: Where the request, failover, race and redirect counters go (default: the bootstrapped
    ///     factory); the same instruments as the URL protocol's.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for an unreadable trust-root file or a limit that
    ///   is not positive.
    public init(
        resolver: HostResolver,
        configuration: Configuration = Configuration(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "httpdns.client", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(HTTPDNSError) {
        self.resolver = resolver
        self.configuration = configuration
        self.engine = try ExchangeEngine(
            resolver: resolver, policy: configuration, eventLoopGroup: eventLoopGroup, logger: logger,
            metricsFactory: metricsFactory)
    }

    /// Executes `request` within `timeout` (connect, sending and the whole body), as `HTTPClient.execute` does.
    /// - Returns: The answer of the last hop; its body streams and may not have arrived yet.
    /// - Throws: `HTTPDNSError`; `HTTPDNSError.Code.cancelled` when the task is cancelled.
    public func execute(
        _ request: HTTPClientRequest, timeout: TimeAmount, logger: Logger? = nil
    ) async throws(HTTPDNSError) -> HTTPClientResponse {
        try await execute(request, deadline: .now() + timeout, logger: logger)
    }

    /// Executes `request` by `deadline` (connect, sending and the whole body), as `HTTPClient.execute` does.
    /// - Returns: The answer of the last hop; its body streams and may not have arrived yet.
    /// - Throws: `HTTPDNSError`; `HTTPDNSError.Code.cancelled` when the task is cancelled.
    public func execute(
        _ request: HTTPClientRequest, deadline: NIODeadline, logger: Logger? = nil
    ) async throws(HTTPDNSError) -> HTTPClientResponse {
        let started = ContinuousClock.now
        var trace = RequestTrace(url: Redaction.url(request.url), hops: [], status: nil, bytes: 0, elapsed: .zero)
        do {
            let streamed = try await run(request, deadline: deadline, logger: logger, trace: &trace)
            trace.status = Int(streamed.response.status.code)
            engine.reportWhenBodyEnds(streamed, trace: trace, started: started, handler: configuration.traceHandler)
            return streamed.response
        } catch {
            engine.reportFailure(error, trace: &trace, started: started, handler: configuration.traceHandler)
            throw error
        }
    }

    /// How many pinned (host, IP) clients with this front's client settings (trust roots, timeouts, limits) are
    /// open now, at most `ConnectionPolicy.maximumPinnedClients`. The clients come from the resolver's pool: HTTP DNS
    /// and other fronts on the same resolver with the same settings use the same ones.
    var pinnedClientCount: Int { transport.clientCount }

    /// Gives up this front's pinned clients: closed unless another user of the resolver's pool shares their
    /// settings (the resolver's own shutdown closes every one). Later requests fail with `HTTPDNSError.Code.shutdown`.
    public func shutdown() async {
        await transport.shutdown()
    }

    // MARK: - Hops

    private func run(
        _ original: HTTPClientRequest, deadline: NIODeadline, logger: Logger?, trace: inout RequestTrace
    ) async throws(HTTPDNSError) -> PinnedTransport.StreamedResponse {
        guard original.tlsConfiguration == nil else {
            throw HTTPDNSError(
                code: .invalidRequest,
                message:
                    "a request's own tlsConfiguration is not taken (certificates are always checked for the real host); "
                    + "add trust roots with Configuration.additionalTrustRoots",
                url: Redaction.url(original.url))
        }
        var request = original
        var redirects = 0
        while true {
            let (url, host) = try Self.target(of: request.url)
            var hop = request
            hop.url = url.absoluteString
            let streamed = try await send(hop, url: url, host: host, deadline: deadline, logger: logger, trace: &trace)
            let response = streamed.response
            guard configuration.followRedirects,
                let step = try RedirectRule.step(
                    status: Int(response.status.code), location: response.headers.first(name: "Location"),
                    method: request.method.rawValue, from: url)
            else { return streamed }
            try RedirectRule.checkDowngrade(
                from: url, to: step.target, allowed: configuration.allowsInsecureRedirects)
            redirects += 1
            guard redirects <= configuration.maximumRedirects else {
                throw HTTPDNSError(
                    code: .tooManyRedirects, message: "more than \(configuration.maximumRedirects) redirects",
                    url: Redaction.url(original.url))
            }
            metrics.redirects.increment()
            await StreamedHop(streamed: streamed).discard()
            request.url = step.target.absoluteString
            if step.becomesGET {
                request.method = .GET
                request.body = nil
                for name in RedirectRule.bodyHeaders { request.headers.remove(name: name) }
            }
            if step.crossOrigin {
                for name in RedirectRule.credentialHeaders { request.headers.remove(name: name) }
            }
        }
    }

    /// Sends one hop: resolves its host (when in scope) and tries the ranked addresses in turn.
    private func send(
        _ request: HTTPClientRequest, url: URL, host: String, deadline: NIODeadline, logger: Logger?,
        trace: inout RequestTrace
    ) async throws(HTTPDNSError) -> PinnedTransport.StreamedResponse {
        guard let target = HopTarget(url, host: host) else {
            throw HTTPDNSError(
                code: .badURL, message: "the URL has no host", url: Redaction.url(url.absoluteString))
        }
        let urlText = url.absoluteString
        var hop = RequestTrace.Hop(
            url: Redaction.url(urlText), method: request.method.rawValue,
            hostHeader: request.headers.first(name: "Host") ?? target.hostHeader,
            address: nil, freshness: nil, status: nil, failedAttempts: [], resolveTime: .zero, elapsed: .zero)
        defer { trace.hops.append(hop) }
        let remaining = Duration.nanoseconds(max((deadline - .now()).nanoseconds, 0))
        let spans = HopSpans(
            policy: configuration, method: request.method.rawValue, url: url, target: target)
        let streamed: PinnedTransport.StreamedResponse
        do {
            let candidates = try await engine.candidates(
                target, url: urlText, resolve: true, policy: configuration,
                budget: remaining, deadline: deadline, spans: spans, hop: &hop)
            let transport = self.transport
            streamed = try await engine.attempt(
                candidates, method: request.method.rawValue, url: urlText, deadline: deadline, spans: spans, hop: &hop
            ) { address, connection in
                let streamed = try await transport.stream(
                    request, host: host, address: address, deadline: deadline, url: urlText, logger: logger,
                    connection: connection)
                return (streamed, streamed.headLatency)
            }
        } catch {
            spans.end(hop, error: error)
            throw error
        }
        hop.status = Int(streamed.response.status.code)
        spans.end(hop, error: nil)
        return streamed
    }

    /// The hop's URL with its host lowercased (the pinned client matches the name exactly), and that host.
    private static func target(of text: String) throws(HTTPDNSError) -> (URL, String) {
        // The common case, an http(s) URL whose host is lowercase already and has no fragment, is used as parsed.
        if let url = URL(string: text, encodingInvalidCharacters: false), let host = url.host, !host.isEmpty,
            !host.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }), url.fragment == nil,
            let scheme = url.scheme, scheme == "http" || scheme == "https"
        {
            return (url, host)
        }
        guard var components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            throw HTTPDNSError(
                code: .badURL, message: "not an absolute http or https URL", url: Redaction.url(text))
        }
        guard scheme == "http" || scheme == "https" else {
            throw HTTPDNSError(
                code: .unsupportedURL, message: "only http and https are handled", url: Redaction.url(text))
        }
        let lowered = host.lowercased()
        if lowered != host, IPAddress(host) == nil { components.percentEncodedHost = lowered }
        components.fragment = nil
        guard let url = components.url else {
            throw HTTPDNSError(code: .badURL, message: "invalid URL", url: Redaction.url(text))
        }
        return (url, lowered)
    }

}
