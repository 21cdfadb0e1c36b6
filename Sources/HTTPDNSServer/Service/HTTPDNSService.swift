public import CoreMetrics
import Foundation
public import HTTPDNS
public import Logging
import Synchronization
public import Tracing

/// HTTP DNS answered from a `HostResolver`: RFC 8484 DoH (`/dns-query`, GET and POST), the JSON API
/// (`/resolve`), Alibaba-compatible `/{account}/d` and `/{account}/sign_d`, Tencent-compatible `/d?dn=`, `/healthz`,
/// `/readyz` and, with an exporter, `/metrics`, `/stats.json` and the dashboard (for requests of the admin listener
/// only).
///
/// The type knows nothing of sockets: an HTTP server front (``HTTPDNSServer``) maps its requests to
/// ``ServiceRequest`` and back. Every answer comes from the same pipeline an application would use (overrides,
/// the hosts file, the scored cache, the upstreams), ranked by the pipeline's scores and cut to
/// `Configuration-swift.struct.maximumAnswers`. Names are resolved as given (absolute): a server applies no search
/// domains. Malformed requests get a 4xx with a one-line reason, never a crash. Each client network gets its own
/// rate limit; every request is counted in metrics and, at `info` level, in an access log without secrets or full
/// client addresses.
public final class HTTPDNSService: Sendable {
    /// The resolver answers come from.
    public let resolver: HostResolver
    /// The configuration in force.
    var configuration: Configuration { settings.withLock { $0 } }
    let settings: Locked<Configuration>
    let logger: Logger
    let draining = Locked(false)
    let now: @Sendable () -> Int64
    let limiter: RateLimiter
    /// The service's metrics; the server front records its connection metrics here too.
    let metrics: ServiceMetrics
    let forwarder: (any DNSMessageForwarder)?
    let exporter: (@Sendable () -> [UInt8])?
    /// Where a server span per request goes (OpenTelemetry export); `nil`, the default, makes none.
    let tracer: (any Tracer)?
    /// The last `/metrics` text and when it was made: rendered at most once a second, whoever asks.
    let renderedMetrics = Locked<(text: [UInt8], made: ContinuousClock.Instant)?>(nil)
    let reports = ReportAggregator()
    /// Relayed answers of other types, kept while their TTLs run.
    let forwardedAnswers = ForwardedAnswerCache()
    let configurationChanges = Atomic<UInt64>(0)
    /// The names asked for most, for the operator's console.
    let busyNames = BusyNames()
    /// Answers by client network, and the names known to be the same for every network.
    let subnetAnswers = ClientSubnetCache()
    /// What each client network reported for the addresses of a name, for ordering that network's answers.
    let networkScores = NetworkScores()
    /// Requests waiting for upstreams, in total and per client network.
    let upstreamBudget = UpstreamBudget()
    /// Report signatures already used.
    let reportReplays = ReplayGuard()
    /// The mark of the queries this server forwards, to see a forwarding loop.
    let forwardingMarker = ForwardingMarker()
    /// The relay's last answer and failures in a row, for `GET /admin/status`.
    let relayHealth = UpstreamHealth()
    /// When the service was made, for `GET /admin/status`.
    let started = Date()
    /// What the control calls reach beyond the service (``setControl(_:)``).
    let control = Locked<ServiceControl?>(nil)
    /// Where the server listens, for `GET /admin/status`.
    let listeners = Locked<[ServerStatus.Listener]>([])
    /// How often the control calls may run.
    let controlBudget = Locked(ControlBudget())

    /// Grows whenever an answer may change other than by time: the resolver's cache, overrides or configuration,
    /// or this service's configuration (see `AnswerMemo`).
    var answerGeneration: UInt64 {
        configurationChanges.load(ordering: .acquiring) &+ resolver.answerGeneration &+ subnetAnswers.generation
            &+ networkScores.generation
    }

    /// The answer `memo` keeps for `message`, if the generation and its name's counter still allow it.
    func kept(_ message: [UInt8], in memo: AnswerMemo, generation: UInt64, now: ContinuousClock.Instant)
        -> (ServiceResponse, String?)?
    {
        guard let kept = memo.answer(to: message, generation: generation, now: now, versions: resolver.nameVersion)
        else { return nil }
        // A cache hit the resolver never sees: counted here, so that the hit ratio covers this path too.
        metrics.memoHit()
        return kept
    }

    /// Where the cache counts changes of `name` and what the counter reads now (read before the lookup, like
    /// ``answerGeneration``); `nil` without a name.
    func nameStamp(_ name: String?) -> AnswerMemo.NameStamp? {
        guard let name else { return nil }
        let slot = NameVersions.slot(for: name)
        return AnswerMemo.NameStamp(slot: slot, version: resolver.nameVersion(slot))
    }

    /// Creates the service.
    /// - Parameters:
    ///   - resolver: Where answers come from.
    ///   - configuration: Limits, accounts, rate limits.
    ///   - logger: Errors, and the access log at `info` level.
    ///   - metricsFactory: Where metrics go; by default the process's `MetricsSystem`.
    ///   - forwarder: Where queries for other types go when ``Configuration-swift.struct/otherTypes`` says so.
    ///   - metricsExporter: The text `/metrics` serves (Prometheus exposition format); without it `/metrics` is 404.
    ///   - tracer: Where a server span per request goes (see `ServiceSpan`); `nil` makes none.
    public convenience init(
        resolver: HostResolver, configuration: Configuration = .init(), logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil, forwarder: (any DNSMessageForwarder)? = nil,
        metricsExporter: (@Sendable () -> [UInt8])? = nil, tracer: (any Tracer)? = nil
    ) {
        self.init(
            resolver: resolver, configuration: configuration, logger: logger, metricsFactory: metricsFactory,
            forwarder: forwarder, metricsExporter: metricsExporter, tracer: tracer,
            now: { Int64(Date().timeIntervalSince1970) })
    }

    package init(
        resolver: HostResolver, configuration: Configuration, logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil,
        forwarder: (any DNSMessageForwarder)? = nil, metricsExporter: (@Sendable () -> [UInt8])? = nil,
        tracer: (any Tracer)? = nil, now: @escaping @Sendable () -> Int64
    ) {
        self.resolver = resolver
        self.settings = Locked(configuration)
        self.logger = logger
        self.now = now
        self.limiter = RateLimiter(limits: configuration.limits)
        self.metrics = ServiceMetrics(factory: metricsFactory)
        self.forwarder = forwarder
        self.exporter = metricsExporter
        self.tracer = tracer
    }

    /// Replaces the configuration while serving (a settings reload); connections and requests in progress carry on.
    public func apply(_ configuration: Configuration) {
        settings.withLock { $0 = configuration }
        limiter.update(configuration.limits)
        configurationChanges.add(1, ordering: .releasing)
    }

    /// From now on `/readyz` answers 503, so a load balancer stops sending new clients (graceful shutdown).
    public func drain() { draining.withLock { $0 = true } }

    /// Whether ``drain()`` was called: connections that start now are told at once to go elsewhere.
    var isDraining: Bool { draining.withLock { $0 } }

    /// Answers one request, with the same limits as the server's listeners: a request that must wait for an
    /// upstream takes a place of its client network first (503 with `Retry-After` without one).
    public func handle(_ request: ServiceRequest) async -> ServiceResponse {
        let started = ContinuousClock.now
        var request = request
        takeForwardedClient(&request)
        let plan = plan(request)
        let response: ServiceResponse
        if let (immediate, _) = immediateResponse(plan) {
            response = immediate
        } else {
            if let (ticket, admitted) = await waitForUpstream(request, relay: plan.relays) {
                response = await complete(plan)
                releaseUpstream(ticket, admitted: admitted, abandoned: Task.isCancelled)
            } else {
                response = Self.upstreamBusy
            }
        }
        finished(request, plan: plan, response: response, started: started, waited: nil)
        return response
    }

    // MARK: - Plans: what a request needs

    /// What answering a request takes: nothing more (an error, health), or lookups and how to render their results.
    package struct Plan: Sendable {
        enum Work: Sendable {
            case done(ServiceResponse)
            case lookups([Lookup], @Sendable ([LookupResult]) -> ServiceResponse)
            case forward(Relay)
        }

        var endpoint: String
        package var name: String?
        var work: Work
        /// For an RFC 8484 query the cache may answer: the message, and the generation and the name's counter read
        /// before the lookup, so the answer can be kept in an `AnswerMemo`.
        package var memoizable: (message: [UInt8], generation: UInt64, stamp: AnswerMemo.NameStamp?)?
        /// The answer ends with the client's ECS option, echoed (see ``AnswerMemo``).
        package var echoesSubnet = false
        /// Whether the answer may be kept in an `AnswerMemo` at all: not when the client stated a network that no
        /// lookup used (no client address to stand in for a non-public one), since the memo's key leaves the
        /// stated address out and the server's own view must not answer other networks' statements.
        package var keepable = true

        /// Whether the work is a relay (it takes a relay's upstream place, not a lookup's).
        var relays: Bool {
            if case .forward = work { return true }
            return false
        }
    }

    /// A query of another type to relay: the message with the client's ECS option removed, the network to send in
    /// its place (`nil`: none) and the client's own option to echo (`nil`: it sent none, or it is not used).
    struct Relay: Sendable {
        var query: DNSQueryMessage
        var message: [UInt8]
        var subnet: IPNetwork?
        /// Whether `subnet` was chosen by the client (see `clientNetwork`): its answers are kept for it only.
        var chosen = false
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
        /// Whether `subnet` was chosen by the client rather than its own (see `clientNetwork`): its answers serve
        /// that statement only.
        var chosen = false

        init(name: String, family: AddressFamily, limit: Int, network: (subnet: IPNetwork?, chosen: Bool)) {
            self.name = name
            self.family = family
            self.limit = limit
            self.subnet = network.subnet
            self.chosen = network.chosen
        }
    }

    /// The addresses, their TTL, and the prefix length of the client's network the answer holds for (0: every
    /// client).
    /// `stale`: the answer is served past its TTL (RFC 8767), which an Extended DNS Error says.
    typealias LookupResult = Result<(addresses: [IPAddress], ttl: UInt32, scope: Int, stale: Bool), LookupFailure>

    /// Reads the request, applies the rate limit, and says what answering it takes: from `memo` when it holds the
    /// answer to the same RFC 8484 query at `now`.
    package func plan(_ request: ServiceRequest, memo: AnswerMemo? = nil, now: ContinuousClock.Instant = .now) -> Plan {
        if request.transport.carriesDNSMessages { return dnsTransportPlan(request, memo: memo, now: now) }
        let target = RequestTarget(request.target)
        let segments = target.path == "/dns-query" ? ["dns-query"] : target.segments
        // The operator's endpoints answer on the admin listener only, and it answers nothing else: a health check
        // is the one endpoint both have.
        guard let endpoint = Self.endpoint(segments),
            request.listener == .service
                ? !Self.operatorEndpoints.contains(endpoint)
                : Self.operatorEndpoints.contains(endpoint) || endpoint == "healthz" || endpoint == "readyz"
        else {
            return Plan(endpoint: "unknown", work: .done(.text(404, "no such endpoint")))
        }
        if request.listener == .service, let limited = rateLimited(request, endpoint: endpoint) { return limited }
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
                if let (response, name) = kept(message, in: memo, generation: generation, now: now) {
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
        if !configuration.answersPublicEndpoints, ["dns-query", "resolve", "tencent"].contains(endpoint) {
            return Plan(
                endpoint: endpoint, work: .done(.text(403, "this service answers requests for an account only")))
        }
        switch endpoint {
        case "dns-query":
            guard request.method == "GET" || request.method == "POST" else { return notAllowed("GET, POST") }
            var plan = dnsMessagePlan(request, dns: request.method == "GET" ? dns : nil, configuration)
            if memo != nil, plan.keepable, case .lookups = plan.work, case .some(.some(let message)) = dns {
                plan.memoizable = (message, generation, nameStamp(plan.name))
            }
            return plan
        case "report":
            guard configuration.acceptClientReports else {
                return Plan(endpoint: endpoint, work: .done(.text(404, "no such endpoint")))
            }
            guard request.method == "POST" else { return notAllowed("POST") }
            return Plan(
                endpoint: endpoint, work: .done(report(request.body, query: target.query, client: request.client)))
        case _ where Self.operatorEndpoints.contains(endpoint):
            return operatorPlan(endpoint, method: request.method, target: target, now: now)
        case _ where request.method != "GET":
            return notAllowed("GET")
        case "healthz":
            return Plan(endpoint: endpoint, work: .done(.text(200, "ok")))
        case "readyz":
            let ready = !draining.withLock { $0 }
            return Plan(endpoint: endpoint, work: .done(ready ? .text(200, "ready") : .text(503, "draining")))
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

    /// The endpoint a request path's segments name, `nil` for none.
    static func endpoint(_ segments: [Substring]) -> String? {
        switch (segments.count, segments.last) {
        case (1, "dns-query"): "dns-query"
        case (1, "resolve"): "resolve"
        case (1, "d"): "tencent"
        case (2, "status") where segments[0] == "admin", (2, "flush") where segments[0] == "admin",
            (2, "reload") where segments[0] == "admin":
            "admin/" + segments[1]
        case (2, "d"), (2, "sign_d"): "alibaba"
        case (1, "healthz"), (1, "readyz"), (1, "metrics"), (1, "report"), (1, "stats.json"), (1, "dashboard"):
            String(segments[0])
        case (0, _): "dashboard"
        default: nil
        }
    }

    /// A 429 plan when the client's network is over its rate. Health checks come from the operator's load balancer
    /// and cost nothing; everything else the public listener answers is limited (the admin listener is not).
    func rateLimited(_ request: ServiceRequest, endpoint: String) -> Plan? {
        guard endpoint != "healthz", endpoint != "readyz",
            let wait = limiter.admit(request.client, unverified: request.unverified)
        else { return nil }
        metrics.rateLimited.increment()
        let seconds = max(1, wait.roundedUpMilliseconds / 1000 + (wait.roundedUpMilliseconds % 1000 == 0 ? 0 : 1))
        return Plan(
            endpoint: endpoint, work: .done(.text(429, "too many requests", headers: ["Retry-After": "\(seconds)"])))
    }

    /// The answer when it needs no waiting (an error, or every lookup answered by a local layer or the cache);
    /// `nil` when an upstream must be asked. An HTTP front calls it on its event loop and so answers cache hits
    /// without a task switch.
    /// `steadyFor`: how long the same lookups would give the same answer, barring a change of `answerGeneration`
    /// (`nil` unless every lookup was a steady cache hit).
    package func immediateResponse(_ plan: Plan) -> (response: ServiceResponse, steadyFor: Duration?)? {
        switch plan.work {
        case .done(let response):
            return (response, nil)
        case .forward(let relay):
            // A relayed answer still kept is answered at once: it takes no upstream place.
            return immediateRelayAnswer(relay).map { ($0, nil) }
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
}
