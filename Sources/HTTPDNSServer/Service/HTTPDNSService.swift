public import CoreMetrics
import Foundation
public import HTTPDNS
public import Logging
import Synchronization

/// One HTTP request to the service, as an HTTP server front hands it over.
public struct ServiceRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The request target: the path and, after `?`, the query.
    public var target: String
    /// The `Content-Type` header, if any.
    public var contentType: String?
    /// The body (empty for `GET`).
    public var body: [UInt8]
    /// The client's address, for rate limits and access logs (never logged in full unless configured).
    public var client: IPAddress?
    /// How the request arrived, for metrics and access logs.
    public var transport: Transport
    /// The `X-Forwarded-For` header (every field joined by commas), if any: read only when ``client`` is a trusted
    /// proxy (``HTTPDNSService/Configuration-swift.struct/trustedProxies``).
    public var forwardedFor: String?
    /// The `Forwarded` header (RFC 7239, every field joined by commas), if any: read as ``forwardedFor`` is, and
    /// preferred to it.
    public var forwarded: String?

    /// How a request reached the service.
    public enum Transport: String, Sendable, Hashable, CaseIterable {
        /// HTTP without TLS.
        case http
        /// HTTP over TLS (HTTP/2 or HTTP/1.1).
        case https
        /// Plain DNS over UDP.
        case udp
        /// Plain DNS over TCP.
        case tcp
        /// DNS over TLS.
        case tls
    }

    /// Creates a request.
    public init(
        method: String, target: String, contentType: String? = nil, body: [UInt8] = [], client: IPAddress? = nil,
        transport: Transport = .http
    ) {
        self.transport = transport
        self.method = method
        self.target = target
        self.contentType = contentType
        self.body = body
        self.client = client
    }
}

/// The service's answer to one ``ServiceRequest``.
public struct ServiceResponse: Sendable, Hashable {
    /// The HTTP status.
    public var status: Int
    /// The `Content-Type`.
    public var contentType: String
    /// Extra headers (`Allow`, `Retry-After`); empty on answers, the hot path.
    public var headers: [String: String]
    /// `Cache-Control: max-age=` this many seconds (answers: their records' smallest TTL).
    public var maxAge: UInt32?
    /// The body.
    public var body: [UInt8]

    init(status: Int, contentType: String, headers: [String: String] = [:], maxAge: UInt32? = nil, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.maxAge = maxAge
        self.body = body
    }

    /// Every extra header: ``headers`` and, from ``maxAge``, `Cache-Control`.
    var allHeaders: [String: String] {
        guard let maxAge else { return headers }
        var all = headers
        all["Cache-Control"] = "max-age=\(maxAge)"
        return all
    }

    static func text(_ status: Int, _ text: String, headers: [String: String] = [:]) -> ServiceResponse {
        ServiceResponse(
            status: status, contentType: "text/plain; charset=utf-8", headers: headers, body: Array((text + "\n").utf8))
    }
}

/// Sends DNS messages the service does not answer itself (types other than A and AAAA) to an upstream and returns
/// its answer; ``CAresForwarder`` sends them through c-ares.
public protocol DNSMessageForwarder: Sendable {
    /// Sends `query` (a whole DNS message) and returns the upstream's answer.
    func forward(_ query: [UInt8]) async throws -> [UInt8]
}

/// HTTP DNS answered from a ``HostResolver``: RFC 8484 DoH (`/dns-query`, GET and POST), the JSON API
/// (`/resolve`), Alibaba-compatible `/{account}/d` and `/{account}/sign_d`, Tencent-compatible `/d?dn=`, `/healthz`,
/// `/readyz` and, with an exporter, `/metrics`.
///
/// The type knows nothing of sockets: an HTTP server front (``HTTPDNSServer``) maps its requests to
/// ``ServiceRequest`` and back. Every answer comes from the same pipeline an application would use (overrides,
/// the hosts file, the scored cache, the upstreams), ranked by the pipeline's scores and cut to
/// ``Configuration-swift.struct/maximumAnswers``. Names are resolved as given (absolute): a server applies no search
/// domains. Malformed requests get a 4xx with a one-line reason, never a crash. Each client network gets its own
/// rate limit; every request is counted in metrics and, at `info` level, in an access log without secrets or full
/// client addresses.
public final class HTTPDNSService: Sendable {
    /// What the service answers and how; ``apply(_:)`` replaces it while serving.
    public struct Configuration: Sendable, Hashable {
        /// What to do with DNS queries for types other than A and AAAA.
        public typealias OtherTypes = ServeSettings.OtherQueryTypes

        /// The most addresses in one answer (best first).
        public var maximumAnswers: Int
        /// Vendor accounts served on `/{account}/d` and `/{account}/sign_d`, each with its signing secret (for an
        /// account with a secret only signed requests are answered).
        public var accounts: [String: HTTPDNSSecret?]
        /// Requests per second each client network (IPv4 /32, IPv6 /64) may make; 0 turns the limit off.
        public var rateLimitPerSecond: Double
        /// How many requests a client may make at once before the rate applies.
        public var rateLimitBurst: Double
        /// What happens to DNS queries for other types.
        public var otherTypes: OtherTypes
        /// Whether access logs carry the whole client address rather than its network (/24 or /48).
        public var logFullClientAddresses: Bool
        /// Whether `POST /report` is accepted: connect times and failures that clients measured for an address the
        /// server answers for a host. Only reports signed for an account or sent from ``reportNetworks`` count, and
        /// they reach the server's scores only as the median of several client networks (see ``ReportAggregator``).
        public var acceptClientReports: Bool
        /// Networks whose clients may report without an account signature.
        public var reportNetworks: [IPNetwork]
        /// How far ahead a signed request's expiry may be (vendors sign for minutes, not forever).
        public var signatureWindow: Duration
        /// Whether the endpoints that carry no account (`/dns-query`, `/resolve`, `/d?dn=`) answer; without them
        /// every answer needs an account (signed, when its account is signed-only).
        public var publicEndpoints: Bool
        /// How much of a client's address names its network for the rate limit and for reports.
        public var clientPrefixes: ClientPrefixes
        /// The most queries of other types being forwarded at once; past it a query gets SERVFAIL at once.
        public var maximumForwardedQueries: Int
        /// Whether reverse lookups (PTR) into private, loopback, link-local and other guarded ranges are forwarded.
        public var forwardsGuardedReverseLookups: Bool
        /// Where a client's network for EDNS Client Subnet comes from, if anywhere.
        public var clientSubnetMode: ServeSettings.ClientSubnetMode
        /// The most bits of a client's address sent upstream as its subnet (by default /24 and /56); a client that
        /// sends a shorter subnet is never given a longer one.
        public var clientSubnetPrefixes: ClientPrefixes
        /// Proxies (load balancers) whose `Forwarded` or `X-Forwarded-For` header names the client: for a request
        /// from one of them, the client is the last address in the header that is not itself one of them (for
        /// rate limits, EDNS Client Subnet, reports and logs). Empty (the default): the headers are ignored.
        public var trustedProxies: [IPNetwork]
        /// Regions for steering by client reports: a client inside one counts as that region (its reports order
        /// the answers of every client in it); any other client as its own network (``clientSubnetPrefixes``).
        public var steeringRegions: [IPNetwork]

        /// Creates a configuration.
        public init(
            maximumAnswers: Int = 8, accounts: [String: HTTPDNSSecret?] = [:], rateLimitPerSecond: Double = 0,
            rateLimitBurst: Double = 0, otherTypes: OtherTypes = .notImplemented, logFullClientAddresses: Bool = false,
            acceptClientReports: Bool = false, reportNetworks: [IPNetwork] = [],
            signatureWindow: Duration = .seconds(600), publicEndpoints: Bool = true,
            clientPrefixes: ClientPrefixes = ClientPrefixes(), maximumForwardedQueries: Int = 256,
            forwardsGuardedReverseLookups: Bool = false, clientSubnetMode: ServeSettings.ClientSubnetMode = .on,
            clientSubnetPrefixes: ClientPrefixes = ClientPrefixes(ipv4: 24, ipv6: 56), trustedProxies: [IPNetwork] = [],
            steeringRegions: [IPNetwork] = []
        ) {
            self.trustedProxies = trustedProxies
            self.steeringRegions = steeringRegions
            self.clientSubnetMode = clientSubnetMode
            self.clientSubnetPrefixes = clientSubnetPrefixes
            self.maximumAnswers = max(maximumAnswers, 1)
            self.accounts = accounts
            self.rateLimitPerSecond = max(rateLimitPerSecond, 0)
            self.rateLimitBurst = max(rateLimitBurst, rateLimitPerSecond > 0 ? 1 : 0)
            self.otherTypes = otherTypes
            self.logFullClientAddresses = logFullClientAddresses
            self.acceptClientReports = acceptClientReports
            self.reportNetworks = reportNetworks
            self.signatureWindow = signatureWindow
            self.publicEndpoints = publicEndpoints
            self.clientPrefixes = clientPrefixes
            self.maximumForwardedQueries = max(maximumForwardedQueries, 1)
            self.forwardsGuardedReverseLookups = forwardsGuardedReverseLookups
        }

        /// The configuration the `serve.*` settings describe, with the accounts' secrets read by the caller.
        public init(settings: ServeSettings, accounts: [String: HTTPDNSSecret?]) {
            self.init(
                maximumAnswers: settings.maximumAnswers, accounts: accounts,
                rateLimitPerSecond: Double(settings.rateLimitPerSecond),
                rateLimitBurst: Double(settings.rateLimitBurst),
                otherTypes: settings.otherTypes, logFullClientAddresses: settings.logFullClientAddresses,
                acceptClientReports: settings.acceptClientReports,
                reportNetworks: settings.reportNetworks.compactMap(IPNetwork.init),
                signatureWindow: .seconds(settings.signatureWindowSeconds),
                publicEndpoints: settings.publicEndpoints == .on
                    || (settings.publicEndpoints == .auto && !accounts.values.contains { $0 != nil }),
                clientPrefixes: ClientPrefixes(ipv4: settings.clientPrefixV4, ipv6: settings.clientPrefixV6),
                maximumForwardedQueries: settings.maximumForwardedQueries,
                forwardsGuardedReverseLookups: settings.probeGuardedAddresses,
                clientSubnetMode: settings.clientSubnetMode,
                clientSubnetPrefixes: ClientPrefixes(
                    ipv4: settings.clientSubnetPrefixV4, ipv6: settings.clientSubnetPrefixV6),
                trustedProxies: settings.trustedProxies.compactMap(IPNetwork.init),
                steeringRegions: settings.steeringRegions.compactMap(IPNetwork.init))
        }

        var limits: RateLimiter.Limits {
            .init(perSecond: rateLimitPerSecond, burst: rateLimitBurst, prefixes: clientPrefixes)
        }
    }

    /// The resolver answers come from.
    public let resolver: HostResolver
    /// The configuration in force.
    public var configuration: Configuration { settings.withLock { $0 } }
    private let settings: Locked<Configuration>
    private let logger: Logger
    private let draining = Locked(false)
    private let now: @Sendable () -> Int64
    private let limiter: RateLimiter
    /// The service's metrics; the server front records its connection metrics here too.
    let metrics: ServiceMetrics
    private let forwarder: (any DNSMessageForwarder)?
    private let exporter: (@Sendable () -> [UInt8])?
    /// The last `/metrics` text and when it was made: rendered at most once a second, whoever asks.
    private let renderedMetrics = Locked<(text: [UInt8], made: ContinuousClock.Instant)?>(nil)
    private let reports = ReportAggregator()
    private let forwarding = Locked(0)
    /// Relayed answers of other types, kept while their TTLs run.
    private let forwardedAnswers = ForwardedAnswerCache()
    private let configurationChanges = Atomic<UInt64>(0)
    /// Answers by client network, and the names known to be the same for every network.
    let subnetAnswers = ClientSubnetCache()
    /// What each client network reported for the addresses of a name, for ordering that network's answers.
    let networkScores = NetworkScores()

    /// Grows whenever an answer may change other than by time: the resolver's cache, overrides or configuration,
    /// or this service's configuration (see `AnswerMemo`).
    var answerGeneration: UInt64 {
        configurationChanges.load(ordering: .acquiring) &+ resolver.answerGeneration &+ subnetAnswers.generation
            &+ networkScores.generation
    }

    /// Creates the service.
    /// - Parameters:
    ///   - resolver: Where answers come from.
    ///   - configuration: Limits, accounts, rate limits.
    ///   - logger: Errors, and the access log at `info` level.
    ///   - metricsFactory: Where metrics go; by default the process's `MetricsSystem`.
    ///   - forwarder: Where queries for other types go when ``Configuration-swift.struct/otherTypes`` says so.
    ///   - metricsExporter: The text `/metrics` serves (Prometheus exposition format); without it `/metrics` is 404.
    public convenience init(
        resolver: HostResolver, configuration: Configuration = .init(), logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil, forwarder: (any DNSMessageForwarder)? = nil,
        metricsExporter: (@Sendable () -> [UInt8])? = nil
    ) {
        self.init(
            resolver: resolver, configuration: configuration, logger: logger, metricsFactory: metricsFactory,
            forwarder: forwarder, metricsExporter: metricsExporter, now: { Int64(Date().timeIntervalSince1970) })
    }

    init(
        resolver: HostResolver, configuration: Configuration, logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil,
        forwarder: (any DNSMessageForwarder)? = nil, metricsExporter: (@Sendable () -> [UInt8])? = nil,
        now: @escaping @Sendable () -> Int64
    ) {
        self.resolver = resolver
        self.settings = Locked(configuration)
        self.logger = logger
        self.now = now
        self.limiter = RateLimiter(limits: configuration.limits)
        self.metrics = ServiceMetrics(factory: metricsFactory)
        self.forwarder = forwarder
        self.exporter = metricsExporter
    }

    /// Replaces the configuration while serving (a settings reload); connections and requests in progress carry on.
    public func apply(_ configuration: Configuration) {
        settings.withLock { $0 = configuration }
        limiter.update(configuration.limits)
        configurationChanges.add(1, ordering: .releasing)
    }

    /// Writes what each client network reported (see `NetworkScores`) to `path`, replacing it atomically.
    /// - Throws: ``DNSError/Code/fileError`` when the file cannot be written.
    package func saveNetworkScores(to path: String) throws(DNSError) {
        let snapshot = networkScores.snapshot(wallNow: Date().timeIntervalSince1970)
        do {
            let data = try JSONEncoder().encode(snapshot)
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw DNSError(code: .fileError, message: "cannot write \(path): \(error.localizedDescription)", host: "")
        }
    }

    /// Takes back what ``saveNetworkScores(to:)`` wrote; a missing file is nothing to load, an unreadable one is
    /// logged and ignored.
    package func loadNetworkScores(from path: String) {
        guard let data = FileManager.default.contents(atPath: path) else { return }
        guard data.count <= 64 << 20, let snapshot = try? JSONDecoder().decode(NetworkScores.Snapshot.self, from: data)
        else {
            logger.warning("the network scores file cannot be read; starting without it", metadata: ["path": "\(path)"])
            return
        }
        let taken = networkScores.restore(snapshot, wallNow: Date().timeIntervalSince1970)
        metrics.networkScoreTable(networkScores.size)
        logger.debug("network scores loaded", metadata: ["path": "\(path)", "measurements": "\(taken)"])
    }

    /// From now on `/readyz` answers 503, so a load balancer stops sending new clients (graceful shutdown).
    public func drain() { draining.withLock { $0 = true } }

    /// Whether ``drain()`` was called: connections that start now are told at once to go elsewhere.
    var isDraining: Bool { draining.withLock { $0 } }

    /// Answers one request.
    public func handle(_ request: ServiceRequest) async -> ServiceResponse {
        let started = ContinuousClock.now
        var request = request
        takeForwardedClient(&request)
        let plan = plan(request)
        let response = await complete(plan)
        finished(request, plan: plan, response: response, started: started)
        return response
    }

    /// For a request from a trusted proxy that names the client (`Forwarded`, else `X-Forwarded-For`), makes that
    /// client the request's: the last address of the header that is not a trusted proxy itself (the ones before
    /// it were written by whoever sent the request, and cannot be believed). A header that cannot be read, or
    /// names only proxies, leaves the proxy as the client.
    func takeForwardedClient(_ request: inout ServiceRequest) {
        guard request.forwarded != nil || request.forwardedFor != nil, let proxy = request.client else { return }
        let trusted = configuration.trustedProxies
        guard trusted.contains(where: { $0.contains(proxy) }) else { return }
        let hops =
            request.forwarded.map(ForwardedHeader.rfc7239) ?? request.forwardedFor.map(ForwardedHeader.xForwardedFor)
            ?? []
        for hop in hops.reversed() {
            guard let hop else { return }
            if !trusted.contains(where: { $0.contains(hop) }) {
                request.client = hop
                return
            }
        }
    }

    // MARK: - Plans: what a request needs

    /// What answering a request takes: nothing more (an error, health), or lookups and how to render their results.
    struct Plan: Sendable {
        enum Work: Sendable {
            case done(ServiceResponse)
            case lookups([Lookup], @Sendable ([LookupResult]) -> ServiceResponse)
            case forward(Relay)
        }

        var endpoint: String
        var name: String?
        var work: Work
        /// For an RFC 8484 query the cache may answer: the message and the generation read before the lookup, so
        /// the answer can be kept in an `AnswerMemo`.
        var memoizable: (message: [UInt8], generation: UInt64)?
    }

    /// A query of another type to relay: the message with the client's ECS option removed, the network to send in
    /// its place (`nil`: none) and the client's own option to echo (`nil`: it sent none, or it is not used).
    struct Relay: Sendable {
        var query: DNSQueryMessage
        var message: [UInt8]
        var subnet: IPNetwork?
        var stated: IPNetwork?
    }

    /// One name and family to resolve; `name` is lower case, without the trailing dot.
    struct Lookup: Sendable {
        var name: String
        var family: AddressFamily
        /// The most addresses answered (the configuration's, read once with the rest of the plan).
        var limit: Int
        /// The client's network to resolve for (EDNS Client Subnet), already cut to what may be sent upstream;
        /// `nil` for the server's own view.
        var subnet: IPNetwork?
    }

    /// The addresses, their TTL, and the prefix length of the client's network the answer holds for (0: every
    /// client).
    typealias LookupResult = Result<
        (addresses: [IPAddress], ttl: UInt32, scope: Int), DNSAnswerMessage.ResponseCode
    >

    /// Reads the request, applies the rate limit, and says what answering it takes: from `memo` when it holds the
    /// answer to the same RFC 8484 query at `now`.
    func plan(_ request: ServiceRequest, memo: AnswerMemo? = nil, now: ContinuousClock.Instant = .now) -> Plan {
        let target = RequestTarget(request.target)
        let segments = target.path == "/dns-query" ? ["dns-query"] : target.segments
        let endpoint: String
        switch (segments.count, segments.last) {
        case (1, "dns-query"): endpoint = "dns-query"
        case (1, "resolve"): endpoint = "resolve"
        case (1, "d"): endpoint = "tencent"
        case (2, "d"), (2, "sign_d"): endpoint = "alibaba"
        case (1, "healthz"), (1, "readyz"), (1, "metrics"), (1, "report"): endpoint = String(segments[0])
        default: return Plan(endpoint: "unknown", work: .done(.text(404, "no such endpoint")))
        }
        // Health checks come from the operator's load balancer and cost nothing; everything else is limited,
        // /metrics included.
        let exempt = endpoint == "healthz" || endpoint == "readyz"
        if !exempt, let wait = limiter.admit(request.client) {
            metrics.rateLimited.increment()
            let seconds = max(1, wait.roundedUpMilliseconds / 1000 + (wait.roundedUpMilliseconds % 1000 == 0 ? 0 : 1))
            return Plan(
                endpoint: endpoint,
                work: .done(.text(429, "too many requests", headers: ["Retry-After": "\(seconds)"])))
        }
        // A repeated RFC 8484 query: the kept answer (kept only from the full path below, so the endpoint was open
        // and the query valid; a configuration change since ends it).
        var dns: [UInt8]?? = nil
        var generation: UInt64 = 0
        if endpoint == "dns-query", request.method == "GET" || request.method == "POST" {
            dns =
                request.method == "GET"
                ? Self.dnsParameter(target) : Self.isDNSMessage(request.contentType) ? .some(request.body) : nil
            if let memo, case .some(.some(let message)) = dns {
                generation = answerGeneration
                if let (response, name) = memo.answer(to: message, generation: generation, now: now) {
                    return Plan(endpoint: endpoint, name: name, work: .done(response))
                }
            }
        }
        let configuration = self.configuration
        func notAllowed(_ allowed: String) -> Plan {
            Plan(
                endpoint: endpoint,
                work: .done(
                    .text(
                        405, "method \(HostName.printable(request.method)) is not allowed here",
                        headers: ["Allow": allowed])))
        }
        if !configuration.publicEndpoints, ["dns-query", "resolve", "tencent"].contains(endpoint) {
            return Plan(
                endpoint: endpoint, work: .done(.text(403, "this service answers requests for an account only")))
        }
        switch endpoint {
        case "dns-query":
            guard request.method == "GET" || request.method == "POST" else { return notAllowed("GET, POST") }
            var plan = dnsMessagePlan(request, dns: request.method == "GET" ? dns : nil, configuration)
            if memo != nil, case .lookups = plan.work, case .some(.some(let message)) = dns {
                plan.memoizable = (message, generation)
            }
            return plan
        case "report":
            guard configuration.acceptClientReports else {
                return Plan(endpoint: endpoint, work: .done(.text(404, "no such endpoint")))
            }
            guard request.method == "POST" else { return notAllowed("POST") }
            return Plan(
                endpoint: endpoint, work: .done(report(request.body, query: target.query, client: request.client)))
        case _ where request.method != "GET":
            return notAllowed("GET")
        case "healthz":
            return Plan(endpoint: endpoint, work: .done(.text(200, "ok")))
        case "readyz":
            let ready = !draining.withLock { $0 }
            return Plan(endpoint: endpoint, work: .done(ready ? .text(200, "ready") : .text(503, "draining")))
        case "metrics":
            guard let exporter else { return Plan(endpoint: endpoint, work: .done(.text(404, "no such endpoint"))) }
            let text = renderedMetrics.withLock { rendered -> [UInt8] in
                if let rendered, now - rendered.made < .seconds(1) { return rendered.text }
                let text = exporter()
                rendered = (text, now)
                return text
            }
            return Plan(
                endpoint: endpoint,
                work: .done(
                    ServiceResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: text)))
        case "resolve":
            return jsonPlan(target.query, client: request.client, configuration)
        case "tencent":
            return tencentPlan(target.query, client: request.client, configuration)
        default:
            return alibabaPlan(
                account: String(segments[0]), signed: segments[1] == "sign_d", target.query, client: request.client,
                configuration)
        }
    }

    /// The answer when it needs no waiting (an error, or every lookup answered by a local layer or the cache);
    /// `nil` when an upstream must be asked. An HTTP front calls it on its event loop and so answers cache hits
    /// without a task switch.
    /// `steadyFor`: how long the same lookups would give the same answer, barring a change of `answerGeneration`
    /// (`nil` unless every lookup was a steady cache hit).
    func immediateResponse(_ plan: Plan) -> (response: ServiceResponse, steadyFor: Duration?)? {
        switch plan.work {
        case .done(let response):
            return (response, nil)
        case .forward:
            return nil
        case .lookups(let lookups, let render):
            var results: [LookupResult] = []
            results.reserveCapacity(lookups.count)
            var steadyFor: Duration? = .seconds(1)
            for lookup in lookups {
                guard let (result, steady) = cachedLookup(lookup) else { return nil }
                results.append(result)
                steadyFor = steady.flatMap { steady in steadyFor.map { min($0, steady) } }
            }
            return (render(results), steadyFor)
        }
    }

    /// The answer, waiting for upstreams as needed.
    func complete(_ plan: Plan) async -> ServiceResponse {
        switch plan.work {
        case .done(let response):
            return response
        case .forward(let relay):
            return await forward(relay)
        case .lookups(let lookups, let render):
            var results: [LookupResult] = []
            for lookup in lookups { results.append(await self.lookup(lookup)) }
            return render(results)
        }
    }

    /// Counts the request and writes its access log line.
    func finished(_ request: ServiceRequest, plan: Plan, response: ServiceResponse, started: ContinuousClock.Instant) {
        let duration = ContinuousClock.now - started
        metrics.record(endpoint: plan.endpoint, status: response.status, duration: duration)
        metrics.received(over: request.transport)
        logger.info(
            "request",
            metadata: [
                "transport": "\(request.transport.rawValue)",
                "endpoint": "\(plan.endpoint)", "method": "\(HostName.printable(request.method))",
                "status": "\(response.status)", "name": "\(plan.name.map(HostName.printable) ?? "-")",
                "client": "\(clientText(request.client))", "ms": "\(duration.fractionalMilliseconds)",
            ])
    }

    private func clientText(_ client: IPAddress?) -> String {
        guard let client else { return "-" }
        if configuration.logFullClientAddresses { return client.description }
        var bytes = client.bytes
        let kept = bytes.count == 4 ? 3 : 6
        for index in kept..<bytes.count { bytes[index] = 0 }
        return "\(IPAddress(bytes: bytes)?.description ?? "-")/\(kept * 8)"
    }

    // MARK: - Lookups

    /// The pipeline's answer for `lookup` as given (absolute), cut to the answer limit; `noData` is an empty success.
    private func lookup(_ lookup: Lookup) async -> LookupResult {
        guard !lookup.name.isEmpty else { return .failure(.refused) }
        do {
            if let subnet = lookup.subnet {
                let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
                switch subnetAnswers.lookup(key, subnet: subnet, now: .now) {
                case .answer(let answer, let scope, let ttl, let prefetch):
                    if prefetch { prefetchInBackground(lookup, subnet: subnet) }
                    return result(answer, lookup, scope: scope, ttl: ttl)
                case .shared(let revalidate):
                    if revalidate { revalidateInBackground(lookup, subnet: subnet) }
                case .miss:
                    do {
                        // With the trailing dot the name is absolute: no search domain is ever tried.
                        let host = try HostName(lookup.name + ".")
                        if let answer = try await subnetLookup(lookup, subnet: subnet, host: host) { return answer }
                    } catch let error as DNSError where error.code.isNegativeAnswer {
                        // A name without addresses is so for everyone: the resolver's negative cache answers next.
                        subnetAnswers.keepShared(key, ttl: 30, now: .now)
                        throw error
                    }
                    // No upstream asks for a network: the server's own view is every network's.
                    let ranked = try await resolver.resolveRanked(lookup.name + ".", family: lookup.family)
                    subnetAnswers.keepShared(key, ttl: ranked.ttl, now: .now)
                    return result(ranked, lookup)
                }
            }
            // With the trailing dot the name is absolute: no search domain is ever tried for a client's name.
            return result(try await resolver.resolveRanked(lookup.name + ".", family: lookup.family), lookup)
        } catch let error as DNSError {
            switch error.code {
            case .noData: return .success(([], 0, 0))
            case .notFound: return .failure(.nameError)
            case .badName: return .failure(.refused)
            default:
                logger.debug(
                    "lookup failed", metadata: ["host": "\(HostName.printable(lookup.name))", "error": "\(error.code)"])
                return .failure(.serverFailure)
            }
        } catch {
            return .failure(.serverFailure)
        }
    }

    /// The answer from a local layer or the cache, and how long a cached one stays the same; `nil` when an
    /// upstream must be asked.
    private func cachedLookup(_ lookup: Lookup) -> (LookupResult, steadyFor: Duration?)? {
        guard !lookup.name.isEmpty else { return (.failure(.refused), nil) }
        if let subnet = lookup.subnet {
            switch subnetAnswers.lookup(.init(name: lookup.name, family: lookup.family), subnet: subnet, now: .now) {
            case .miss:
                // The overrides and the hosts file answer every network alike, and at once.
                if let host = try? HostName(lookup.name + "."),
                    let local = resolver.localAnswer(host, family: lookup.family)
                {
                    subnetAnswers.keepShared(.init(name: lookup.name, family: lookup.family), ttl: local.ttl, now: .now)
                    metrics.clientSubnet(.shared)
                    return (result(local, lookup), nil)
                }
                metrics.clientSubnet(.miss)
                return nil
            case .answer(let answer, let scope, let ttl, let prefetch):
                metrics.clientSubnet(.hit)
                if prefetch { prefetchInBackground(lookup, subnet: subnet) }
                // Kept by network, so never in an encoded-answer memo keyed by the query alone.
                return (result(answer, lookup, scope: scope, ttl: ttl), nil)
            case .shared(let revalidate):
                metrics.clientSubnet(.shared)
                if revalidate { revalidateInBackground(lookup, subnet: subnet) }
            }
        }
        guard let (ranked, steadyFor) = try? resolver.cachedRankedSteadily(lookup.name + ".", family: lookup.family)
        else { return nil }
        // An answer ordered by what the asking network reported is that network's alone: never kept in the memo.
        if lookup.subnet != nil, networkScores.generation > 0, networkScores.hasScores(lookup.name) {
            return (result(ranked, lookup), nil)
        }
        return (result(ranked, lookup), steadyFor)
    }

    /// `ranked` cut to the lookup's family and limit; `scope` and `ttl` for an answer kept by network.
    private func result(_ ranked: RankedResolution, _ lookup: Lookup, scope: Int = 0, ttl: UInt32? = nil)
        -> LookupResult
    {
        let (family, limit) = (lookup.family, lookup.limit)
        var ordered = ranked.addresses
        // The asking network's own reports order its answers (see NetworkScores); no scores at all: nothing to do.
        if let subnet = lookup.subnet, networkScores.generation > 0,
            let theirs = networkScores.order(
                ordered, host: lookup.name, network: Self.steeringNetwork(subnet, configuration.steeringRegions))
        {
            ordered = theirs
        }
        var addresses: [IPAddress] = []
        for address in ordered where address.ip.family == family {
            addresses.append(address.ip)
            if addresses.count == limit { break }
        }
        return .success((addresses, ttl ?? ranked.ttl, scope))
    }

    // MARK: - Client networks (EDNS Client Subnet)

    /// The network `lookup` is answered for: what `stated` says (the client's ECS option, `ip=`,
    /// `edns_client_subnet=`) when the configuration uses it, else the client's address; cut to the configured
    /// prefix and never longer than stated. `nil` when the mode is off, there is no address, or the client stated a
    /// /0 (it asked that its network not be used).
    private func clientSubnet(stated: IPNetwork?, client: IPAddress?, _ configuration: Configuration) -> IPNetwork? {
        let network: IPNetwork
        switch configuration.clientSubnetMode {
        case .off:
            return nil
        case .on where stated != nil:
            network = stated!
            guard network.prefixLength > 0 else { return nil }
        default:
            guard let client else { return nil }
            network = IPNetwork(client, prefixLength: 128)
        }
        let prefixes = configuration.clientSubnetPrefixes
        return network.truncated(to: network.address.family == .ipv4 ? prefixes.ipv4 : prefixes.ipv6)
    }

    /// Asks the upstreams for `lookup` on behalf of its network and keeps what they say: an answer for every
    /// network marks the name as shared (the resolver's cache then answers everyone), a scoped one is kept for the
    /// network it holds for. `nil` when no upstream can ask for a network (the caller asks as the server).
    private func subnetLookup(_ lookup: Lookup, subnet: IPNetwork, host: HostName) async throws -> LookupResult? {
        let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
        guard let answer = try await resolver.resolve(host, family: lookup.family, clientSubnet: subnet) else {
            return nil
        }
        let now = ContinuousClock.now
        guard answer.scope > 0 else {
            subnetAnswers.keepShared(key, ttl: answer.answer.ttl, now: now)
            return result(answer.answer, lookup)
        }
        subnetAnswers.keep(key, network: subnet.truncated(to: answer.scope), answer: answer.answer, now: now)
        metrics.subnetTable(subnetAnswers.size)
        return result(answer.answer, lookup, scope: min(answer.scope, subnet.prefixLength))
    }

    /// The unit a client's reports and ordering go by: the operator's region that holds its network, else the
    /// network itself.
    private static func steeringNetwork(_ subnet: IPNetwork, _ regions: [IPNetwork]) -> IPNetwork {
        regions.first { $0.contains(subnet.address) } ?? subnet
    }

    /// Asks again for a network's answer that is about to expire, so that its clients never wait for the upstream.
    private func prefetchInBackground(_ lookup: Lookup, subnet: IPNetwork) {
        guard let host = try? HostName(lookup.name + ".") else { return }
        metrics.clientSubnet(.prefetch)
        Task { [self] in _ = try? await subnetLookup(lookup, subnet: subnet, host: host) }
    }

    /// Checks again, without holding up the client served the shared answer, whether a name is still the same for
    /// every network.
    private func revalidateInBackground(_ lookup: Lookup, subnet: IPNetwork) {
        let key = ClientSubnetCache.Key(name: lookup.name, family: lookup.family)
        guard let host = try? HostName(lookup.name + ".") else { return subnetAnswers.revalidationFailed(key) }
        Task { [self] in
            do {
                if try await subnetLookup(lookup, subnet: subnet, host: host) == nil {
                    subnetAnswers.revalidationFailed(key)
                }
            } catch {
                subnetAnswers.revalidationFailed(key)
            }
        }
    }

    // MARK: - Client reports

    /// A client's measurement, `{"host": NAME, "ip": ADDRESS, "connectMs": N}` or `{"host": …, "ip": …,
    /// "failed": true}`, for an address the server currently answers for that host (any other address is refused,
    /// so a client cannot plant addresses or scores for names it was not given). It is taken only from
    /// ``Configuration-swift.struct/reportNetworks`` or signed for an account (`?account=A&t=EXPIRY&s=SIGNATURE`,
    /// the `sign_d` signature of the host), and reaches the scores only through ``ReportAggregator``.
    private func report(_ body: [UInt8], query: [String: String], client: IPAddress?) -> ServiceResponse {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let name = object["host"] as? String, let host = try? HostName(name),
            let address = (object["ip"] as? String).flatMap({ IPAddress($0) })
        else {
            return .text(400, "a report is {\"host\": NAME, \"ip\": ADDRESS, \"connectMs\": N or \"failed\": true}")
        }
        let configuration = self.configuration
        let trusted = client.map { client in configuration.reportNetworks.contains { $0.contains(client) } } ?? false
        if !trusted {
            guard let account = query["account"], case .some(.some(let secret)) = configuration.accounts[account],
                signatureFailure(host: host.name, secret: secret, query: query, configuration) == nil
            else { return .text(403, "a report must come from a trusted network or be signed for an account") }
        }
        let connect: Duration?
        if object["failed"] as? Bool == true {
            connect = nil
        } else if let milliseconds = object["connectMs"] as? Double, milliseconds.isFinite, milliseconds >= 0,
            milliseconds <= 60_000
        {
            connect = .seconds(fractional: milliseconds / 1000)
        } else {
            return .text(400, "connectMs must be a number of milliseconds from 0 to 60000")
        }
        // The client's network as its answers are made for (EDNS Client Subnet): answers kept for that network
        // count as answered, and its reports order its own answers.
        let subnet = clientSubnet(stated: nil, client: client, configuration)
        let known =
            (try? resolver.cachedRanked(host.name + ".", family: address.family))?.addresses
            .contains { $0.ip == address } ?? false
        let knownForNetwork =
            subnet.map {
                subnetAnswers.answered(.init(name: host.name, family: address.family), subnet: $0, address: address)
            } ?? false
        guard known || knownForNetwork else {
            return .text(404, "the server has not answered \(address) for \(host.name)")
        }
        if let subnet {
            networkScores.record(
                host: host.name, network: Self.steeringNetwork(subnet, configuration.steeringRegions), address: address,
                connect: connect)
            metrics.networkScoreTable(networkScores.size)
        }
        let network = ClientNetwork(client, prefixes: configuration.clientPrefixes)
        switch reports.record(host: host.name, address: address, network: network, connect: connect) {
        case .connect(let median): resolver.reportConnect(to: address, of: host, latency: median)
        case .failure: resolver.reportFailure(to: address, of: host)
        case nil: break
        }
        return ServiceResponse(status: 204, contentType: "text/plain; charset=utf-8", body: [])
    }

    // MARK: - RFC 8484

    /// A GET's `dns` parameter: `.some(nil)` when it is there but not base64url, `nil` when it is missing.
    private static func dnsParameter(_ target: RequestTarget) -> [UInt8]?? {
        // base64url needs no percent-encoding: decoded straight from the request's bytes.
        if let decoded = target.withRawParameter("dns", { Base64URL.decode($0) }) { return .some(decoded) }
        return target.parameter("dns").map { Base64URL.decode($0) }
    }

    /// Whether a POST's `Content-Type` is `application/dns-message` (parameters aside).
    private static func isDNSMessage(_ contentType: String?) -> Bool {
        // The client's media-type reading (a bare lower-case type, the common case, is compared as it is).
        HTTPDNSResolver.mediaType(contentType) == "application/dns-message"
    }

    /// `dns`: the decoded `dns` parameter of a GET (`.some(nil)`: not base64url).
    private func dnsMessagePlan(_ request: ServiceRequest, dns: [UInt8]??, _ configuration: Configuration) -> Plan {
        func fail(_ status: Int, _ text: String) -> Plan {
            Plan(endpoint: "dns-query", work: .done(.text(status, text)))
        }
        let message: [UInt8]
        if request.method == "GET" {
            guard let encoded = dns else { return fail(400, "the dns parameter is missing") }
            guard let decoded = encoded else { return fail(400, "the dns parameter is not base64url") }
            message = decoded
        } else {
            guard Self.isDNSMessage(request.contentType) else {
                return fail(415, "the body must be application/dns-message")
            }
            message = request.body
        }
        let parsed: DNSQueryMessage
        do {
            parsed = try DNSQueryMessage(message)
        } catch {
            return fail(400, error.reason)
        }
        func answer(_ code: DNSAnswerMessage.ResponseCode, _ records: [DNSAnswerMessage.Record] = []) -> Plan {
            Plan(endpoint: "dns-query", name: parsed.name, work: .done(Self.dnsResponse(parsed, code, records)))
        }
        guard parsed.opcode == 0 else { return answer(.notImplemented) }
        // Class IN only: CHAOS (version.bind and the like) and the rest are not this service's to answer or relay.
        guard parsed.questionClass == 1 else { return answer(.refused) }
        // The client's own ECS option (RFC 7871), used and echoed with the answer's scope when the mode is on; a
        // malformed one is a FORMERR (§7.1.1).
        var stated: IPNetwork?
        if parsed.usesEDNS, configuration.clientSubnetMode == .on {
            do {
                stated = try EDNSClientSubnet.find(in: message)?.subnet
            } catch {
                return answer(.formatError)
            }
        }
        let subnet = clientSubnet(stated: stated, client: request.client, configuration)
        guard parsed.type == 1 || parsed.type == 28 else {
            guard configuration.otherTypes == .forward, forwarder != nil else { return answer(.notImplemented) }
            if parsed.type == 12, !configuration.forwardsGuardedReverseLookups,
                ForwardedQuery.reverseTarget(parsed.name)?.isNonPublic ?? false
            {
                return answer(.refused)
            }
            guard
                let relayed = try? ForwardedQuery.strippingClientSubnet(
                    message, questionEnd: 12 + parsed.question.count)
            else { return answer(.formatError) }
            return Plan(
                endpoint: "dns-query", name: parsed.name,
                work: .forward(Relay(query: parsed, message: relayed, subnet: subnet, stated: stated)))
        }
        let lookup = Lookup(
            name: parsed.name, family: parsed.type == 1 ? .ipv4 : .ipv6, limit: configuration.maximumAnswers,
            subnet: subnet)
        return Plan(
            endpoint: "dns-query", name: parsed.name,
            work: .lookups([lookup]) { [stated] results in
                switch results[0] {
                case .success(let answer):
                    return Self.dnsResponse(
                        parsed, .noError, answer.addresses.map { .init(data: $0.bytes, ttl: answer.ttl) },
                        clientSubnet: stated.map { ($0, min(answer.scope, $0.prefixLength)) })
                case .failure(let code):
                    return Self.dnsResponse(parsed, code, [], clientSubnet: stated.map { ($0, 0) })
                }
            })
    }

    private static func dnsResponse(
        _ query: DNSQueryMessage, _ code: DNSAnswerMessage.ResponseCode, _ records: [DNSAnswerMessage.Record],
        clientSubnet: (network: IPNetwork, scope: Int)? = nil
    ) -> ServiceResponse {
        var ttl = records.first?.ttl ?? 0
        for record in records { ttl = min(ttl, record.ttl) }
        return ServiceResponse(
            status: 200, contentType: "application/dns-message", maxAge: ttl,
            body: DNSAnswerMessage.encode(answering: query, code: code, records: records, clientSubnet: clientSubnet))
    }

    /// The key of relayed answers asked without a client network while ECS is on.
    private static let askedWithoutNetwork = IPNetwork(IPAddress(ipv4: 0, 0, 0, 0), prefixLength: 0)

    /// Relays a query of another type to the forwarder, with the client's ID put back: with the client's network
    /// as an ECS option when there is one, the answer kept for the scope the upstream gave (for every network, or
    /// for the network sent only) and the client's own option echoed with that scope.
    private func forward(_ relay: Relay) async -> ServiceResponse {
        let query = relay.query
        guard let forwarder else { return Self.dnsResponse(query, .notImplemented, []) }
        func respond(_ answer: [UInt8], ttl: UInt32, scope: Int) -> ServiceResponse {
            var body = answer
            if let stated = relay.stated {
                body =
                    EDNSClientSubnet.settingOption(in: answer, stated, scope: min(scope, stated.prefixLength)) ?? answer
            }
            return ServiceResponse(status: 200, contentType: "application/dns-message", maxAge: ttl, body: body)
        }
        let now = ContinuousClock.now
        // Kept answers: for every network (the global key), then for this client's network, or (asked without a
        // network while ECS is on: a client that sent a /0) for clients asked that way only.
        let mode = configuration.clientSubnetMode
        let ownKey = relay.subnet ?? (mode == .off ? nil : Self.askedWithoutNetwork)
        if let (answer, ttl) = forwardedAnswers.answer(to: relay.message, now: now) {
            return respond(answer, ttl: ttl, scope: 0)
        }
        if let ownKey, let (answer, ttl) = forwardedAnswers.answer(to: relay.message, network: ownKey, now: now) {
            return respond(answer, ttl: ttl, scope: ownKey.prefixLength)
        }
        let limit = configuration.maximumForwardedQueries
        let admitted = forwarding.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else { return Self.dnsResponse(query, .serverFailure, []) }
        defer { forwarding.withLock { $0 -= 1 } }
        let withSubnet = relay.subnet.flatMap { subnet in
            EDNSClientSubnet.settingOption(in: relay.message, subnet).map { (subnet, $0) }
        }
        do {
            var answer = try await forwarder.forward(withSubnet?.1 ?? relay.message)
            guard answer.count >= 12 else { return Self.dnsResponse(query, .serverFailure, []) }
            answer[0] = UInt8(query.id >> 8)
            answer[1] = UInt8(query.id & 0xFF)
            var scope = 0
            if let (subnet, _) = withSubnet {
                // No option back: the same for every network (RFC 7871 §7.2.1); one for another network, or one
                // that cannot be read: held for the network sent only.
                switch Result(catching: { () throws(EDNSClientSubnet.Malformed) in try EDNSClientSubnet.find(in: answer)
                })
                {
                case .success(nil): scope = 0
                case .success(.some(let option)) where option.subnet == subnet:
                    scope = min(option.scope, subnet.prefixLength)
                default: scope = subnet.prefixLength
                }
                // The upstream's option names the server's choice of network, not the client's: it goes.
                let questionEnd =
                    answer[4] == 0 && answer[5] == 0
                    ? 12 : (DNSMessageWalk.skipName(answer, from: 12).map { $0 + 4 } ?? answer.count)
                guard questionEnd <= answer.count,
                    let stripped = try? ForwardedQuery.strippingClientSubnet(answer, questionEnd: questionEnd)
                else { return Self.dnsResponse(query, .serverFailure, []) }
                answer = stripped
                forwardedAnswers.keep(answer, to: relay.message, network: scope > 0 ? subnet : nil, now: .now)
            } else {
                // Asked as the server: with ECS off its view is every client's; with ECS on (a client that sent a
                // /0) only clients asked the same way get it: an authoritative that tailors answers went by the
                // server's address, and that answer must not reach clients of other networks.
                forwardedAnswers.keep(
                    answer, to: relay.message, network: mode == .off ? nil : Self.askedWithoutNetwork, now: .now)
            }
            let ttl = ForwardedAnswerCache.recordTTLs(answer)?.map(\.ttl).min() ?? 0
            return respond(answer, ttl: ttl, scope: scope)
        } catch let error as DNSError where error.code == .refused {
            // Every upstream refused: the client hears REFUSED, not a failure of this server.
            return Self.dnsResponse(query, .refused, [])
        } catch {
            logger.debug(
                "forwarding failed", metadata: ["host": "\(HostName.printable(query.name))", "error": "\(error)"])
            return Self.dnsResponse(query, .serverFailure, [])
        }
    }

    // MARK: - JSON API

    private func jsonPlan(_ query: [String: String], client: IPAddress?, _ configuration: Configuration) -> Plan {
        guard let name = query["name"], !name.isEmpty else {
            return Plan(endpoint: "resolve", work: .done(.text(400, "the name parameter is missing")))
        }
        let typeText = (query["type"] ?? "A").uppercased()
        let type: UInt16
        switch typeText {
        case "A", "1": type = 1
        case "AAAA", "28": type = 28
        default:
            return Plan(
                endpoint: "resolve",
                work: .done(.text(400, "type \(HostName.printable(typeText)) is not supported (A or AAAA)")))
        }
        var normalised = HostName.asciiLowercased(name)
        if normalised.hasSuffix(".") { normalised.removeLast() }
        let quoted = JSONString.quoted(normalised + ".")
        // Google's form of the client's network: edns_client_subnet=ADDRESS/LENGTH.
        var stated: IPNetwork?
        if let text = query["edns_client_subnet"], configuration.clientSubnetMode == .on {
            guard let network = IPNetwork(text) else {
                return Plan(
                    endpoint: "resolve",
                    work: .done(.text(400, "edns_client_subnet must be a network such as 198.51.100.0/24")))
            }
            stated = network
        }
        let lookup = Lookup(
            name: normalised, family: type == 1 ? .ipv4 : .ipv6, limit: configuration.maximumAnswers,
            subnet: clientSubnet(stated: stated, client: client, configuration))
        return Plan(
            endpoint: "resolve", name: normalised,
            work: .lookups([lookup]) { [stated] results in
                var status = 0
                var answers: [String] = []
                var ttl: UInt32 = 0
                var scope = 0
                switch results[0] {
                case .success(let answer):
                    scope = stated.map { min(answer.scope, $0.prefixLength) } ?? 0
                    ttl = answer.addresses.isEmpty ? 0 : answer.ttl
                    answers = answer.addresses.map { address in
                        "{\"name\":\(quoted),\"type\":\(type),\"TTL\":\(answer.ttl),\"data\":\(JSONString.quoted(address.description))}"
                    }
                case .failure(let code):
                    status = Int(code.rawValue)
                }
                var body = "{\"Status\":\(status),\"TC\":false,\"RD\":true,\"RA\":true,\"AD\":false,\"CD\":false,"
                body += "\"Question\":[{\"name\":\(quoted),\"type\":\(type)}]"
                if !answers.isEmpty { body += ",\"Answer\":[" + answers.joined(separator: ",") + "]" }
                // As Google's API answers it: the network asked for, with the answer's scope as its length.
                if let stated { body += ",\"edns_client_subnet\":\"\(stated.address)/\(scope)\"" }
                body += "}"
                return ServiceResponse(
                    status: 200, contentType: "application/dns-json", maxAge: ttl,
                    body: Array(body.utf8))
            })
    }

    // MARK: - Vendor APIs

    private func alibabaPlan(
        account: String, signed: Bool, _ query: [String: String], client: IPAddress?, _ configuration: Configuration
    ) -> Plan {
        func failure(_ status: Int, _ code: String) -> Plan {
            Plan(
                endpoint: "alibaba",
                work: .done(
                    ServiceResponse(
                        status: status, contentType: "application/json", body: Array("{\"code\":\"\(code)\"}".utf8))))
        }
        // An unknown account, a signed-only account asked without a signature and a wrong signature all get the
        // same answer, so accounts cannot be told apart from outside.
        guard case .some(let secret) = configuration.accounts[account] else { return failure(403, "InvalidSignature") }
        guard let name = query["host"], !name.isEmpty, let host = try? HostName(name) else {
            return failure(400, "InvalidHost")
        }
        if let secret {
            guard signed else { return failure(403, "InvalidSignature") }
            if let reason = signatureFailure(host: name, secret: secret, query: query, configuration) {
                return failure(403, reason)
            }
        } else if signed {
            return failure(403, "InvalidSignature")
        }
        let families: [AddressFamily]
        switch query["query"] {
        case nil, "4": families = [.ipv4]
        case "6": families = [.ipv6]
        case "4,6", "6,4": families = [.ipv4, .ipv6]
        default: return failure(400, "InvalidQuery")
        }
        guard let stated = Self.statedClientAddress(query) else { return failure(400, "InvalidIP") }
        let subnet = clientSubnet(stated: stated, client: client, configuration)
        let hostName = host.name
        return Plan(
            endpoint: "alibaba", name: hostName,
            work: .lookups(
                families.map {
                    Lookup(name: hostName, family: $0, limit: configuration.maximumAnswers, subnet: subnet)
                }
            ) {
                results in
                var lists: [AddressFamily: [String]] = [:]
                var ttl: UInt32?
                for (family, result) in zip(families, results) {
                    if case .success(let answer) = result {
                        lists[family] = answer.addresses.map(\.description)
                        if !answer.addresses.isEmpty { ttl = min(ttl ?? answer.ttl, answer.ttl) }
                    }
                }
                func list(_ family: AddressFamily) -> String {
                    "[" + (lists[family] ?? []).map(JSONString.quoted).joined(separator: ",") + "]"
                }
                let answerTTL = ttl ?? 60
                let body =
                    "{\"host\":\(JSONString.quoted(hostName)),\"ips\":\(list(.ipv4)),\"ipsv6\":\(list(.ipv6)),"
                    + "\"ttl\":\(answerTTL),\"origin_ttl\":\(answerTTL)}"
                return ServiceResponse(status: 200, contentType: "application/json", body: Array(body.utf8))
            })
    }

    private func tencentPlan(_ query: [String: String], client: IPAddress?, _ configuration: Configuration) -> Plan {
        func failure(_ text: String) -> Plan { Plan(endpoint: "tencent", work: .done(.text(400, text))) }
        guard query["alg"] == nil else { return failure("encrypted requests (alg) are not supported") }
        guard let name = query["dn"], !name.isEmpty, let host = try? HostName(name) else {
            return failure("the dn parameter is missing or not a host name")
        }
        let families: [AddressFamily]
        switch query["type"]?.lowercased() {
        case nil, "a": families = [.ipv4]
        case "aaaa": families = [.ipv6]
        case "addrs": families = [.ipv4, .ipv6]
        default: return failure("type must be a, aaaa or addrs")
        }
        let withTTL = query["ttl"] == "1"
        guard let stated = Self.statedClientAddress(query) else { return failure("ip must be an IP address") }
        let subnet = clientSubnet(stated: stated, client: client, configuration)
        return Plan(
            endpoint: "tencent", name: host.name,
            work: .lookups(
                families.map {
                    Lookup(name: host.name, family: $0, limit: configuration.maximumAnswers, subnet: subnet)
                }
            ) {
                results in
                let parts = results.map { result -> String in
                    guard case .success(let answer) = result, !answer.addresses.isEmpty else { return "0" }
                    let list = answer.addresses.map(\.description).joined(separator: ";")
                    return withTTL ? "\(list),\(answer.ttl)" : list
                }
                return ServiceResponse(
                    status: 200, contentType: "text/plain; charset=utf-8",
                    body: Array(parts.joined(separator: "-").utf8))
            })
    }

    // MARK: - Helpers

    /// The vendor APIs' `ip=` (the address the answer is for, as Alibaba and Tencent take it) as a network of that
    /// one address: `.some(nil)` without the parameter, `nil` when it is not an address.
    private static func statedClientAddress(_ query: [String: String]) -> IPNetwork?? {
        guard let text = query["ip"] else { return .some(nil) }
        guard let address = IPAddress(text) else { return nil }
        return .some(IPNetwork(address, prefixLength: 128))
    }

    /// Why the `t` and `s` parameters do not sign `host` for `secret` (an Alibaba-style signature), or `nil` when they
    /// do: `InvalidSignature`, `SignatureExpired`, or `InvalidExpiry` for an expiry further ahead than
    /// ``Configuration-swift.struct/signatureWindow``. Only a correct signature learns about its expiry.
    private func signatureFailure(
        host: String, secret: HTTPDNSSecret, query: [String: String], _ configuration: Configuration
    ) -> String? {
        guard let expiry = query["t"].flatMap({ Int64($0) }), let signature = query["s"] else {
            return "InvalidSignature"
        }
        let expected = Array(AlibabaHTTPDNS.signature(host: host, secret: secret.value, expiry: expiry).utf8)
        guard Self.constantTimeEqual(Array(signature.lowercased().utf8), expected) else { return "InvalidSignature" }
        let now = now()
        guard expiry >= now else { return "SignatureExpired" }
        guard expiry - now <= Int64(configuration.signatureWindow.components.seconds) else { return "InvalidExpiry" }
        return nil
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
