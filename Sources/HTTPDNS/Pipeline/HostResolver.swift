public import CoreMetrics
public import Logging
import Synchronization
public import HTTPDNSCore
import HTTPDNSCAres
package import HTTPDNSClients

/// The library's main entry point: resolves a host through overrides, the scored IP cache, the HTTP DNS
/// providers and c-ares, and ranks the addresses by measured connect speed.
///
/// Order of a lookup:
/// 1. **Overrides** (the overrides file and run-time entries), then **the system hosts file**, answer at once.
/// 2. Short names are completed with the **search domains** (``SearchPolicy``); each candidate name goes
///    through the next steps in turn, and the first with an answer wins.
/// 3. **The cache**: a fresh answer is returned at once (hot answers are refreshed in the background shortly
///    before they expire); an expired one within the maximum staleness is returned too while one background
///    refresh runs; a cached NXDOMAIN or no-data is thrown.
/// 4. **Upstreams** in order (HTTP DNS providers, then c-ares), the first answer wins; or, with
///    ``Configuration/race``, HTTP DNS and c-ares at once, the first good answer wins and the other still fills
///    the cache. Concurrent lookups of one host share one upstream query. When every upstream fails, a stale
///    answer is served rather than an error.
/// 5. When every candidate does not exist, the **fallback** (by default the system resolver, `getaddrinfo`) is
///    asked for the name as given, so names only NSS knows (mDNS, LDAP, container quirks) keep working.
///
/// Addresses are probed with TCP connects in the background (rate-limited, never on a lookup's path), and
/// callers report what their own connects measured with ``reportConnect(to:of:latency:)`` and
/// ``reportFailure(to:of:)``.
///
/// ```swift
/// let resolver = try HostResolver(settings: settings, logger: logger)
/// let answer = try await resolver.resolveRanked("api.example.com")
/// print(answer.best, answer.addresses.map(\.score))
/// await resolver.shutdown()   // saves the cache
/// ```
public final class HostResolver: HostNameResolver {
    /// One upstream source.
    public struct Upstream: Sendable {
        /// The kind of source; race mode runs HTTP DNS against the rest.
        public enum Kind: String, Sendable, Hashable {
            /// An HTTP DNS provider (DoH or a vendor API).
            case httpDNS
            /// Classic DNS through c-ares.
            case cares
            /// Anything else.
            case other
        }

        /// The name used in metrics and logs.
        public var name: String
        /// What exactly is asked, e.g. `cares(127.0.0.1:5353)` or `doh(https://dns.example/dns-query)`: cached
        /// answers record it (``RankedResolution/upstream``), so that they can be told apart by upstream.
        public var identity: String
        /// The kind of source.
        public var kind: Kind
        /// The resolver asked.
        public var resolver: any HostNameResolver
        /// Whether this upstream's NXDOMAIN and no-data answers are trusted (default `true`). Vendor HTTPDNS APIs
        /// answer an empty list both for a name without addresses and when they throttle a client, so theirs are
        /// not: they are never cached, and a cached answer (even stale) is served rather than such an error.
        public var negativeAnswersAreAuthoritative: Bool

        /// Creates an upstream; `identity` defaults to `name`.
        public init(
            name: String, kind: Kind, resolver: any HostNameResolver, identity: String? = nil,
            negativeAnswersAreAuthoritative: Bool = true
        ) {
            self.name = name
            self.identity = identity ?? name
            self.kind = kind
            self.resolver = resolver
            self.negativeAnswersAreAuthoritative = negativeAnswersAreAuthoritative
        }
    }

    /// Background TCP probing of candidate addresses.
    public struct Probing: Sendable, Hashable {
        /// Ports tried in order for each address (the first that connects counts) unless the host's own port is
        /// known from ``HostResolver/resolveRanked(_:family:port:)``.
        public var ports: [Int]
        /// The least time between two probe rounds of one host.
        public var interval: Duration
        /// The connect timeout of one probe.
        public var timeout: Duration
        /// The most hosts probed at once; further rounds are skipped until one ends.
        public var maximumConcurrentHosts: Int
        /// The most addresses of one host probed at once (default 2); the others wait their turn. Each connect
        /// starts after a random delay of up to 20 ms, and an address is never probed twice at once, so probing never
        /// floods a small server's listen backlog.
        public var maximumConcurrentProbesPerHost: Int
        /// The most addresses of one answer probed in a round (default 16, best ranked first): an answer with
        /// hundreds of addresses does not turn into hundreds of connects.
        public var maximumAddressesPerRound: Int
        /// Whether private, loopback, link-local and other non-public addresses are probed (default `true`: an
        /// application probes its own private services on purpose). A server answering the internet turns it off,
        /// so that no answer can make it connect into its own network.
        public var probesGuardedAddresses = true

        /// Creates a probing configuration.
        public init(
            ports: [Int] = [443], interval: Duration = .seconds(60), timeout: Duration = .seconds(1),
            maximumConcurrentHosts: Int = 8, maximumConcurrentProbesPerHost: Int = 2, maximumAddressesPerRound: Int = 16
        ) {
            self.ports = ports.isEmpty ? [443] : ports
            self.interval = interval
            self.timeout = timeout
            self.maximumConcurrentHosts = max(maximumConcurrentHosts, 1)
            self.maximumConcurrentProbesPerHost = max(maximumConcurrentProbesPerHost, 1)
            self.maximumAddressesPerRound = max(maximumAddressesPerRound, 1)
        }
    }

    /// The pipeline's policy.
    public struct Configuration: Sendable {
        /// Ask HTTP DNS and the other upstreams in parallel; the first good answer wins.
        public var race: Bool
        /// Background probing; `nil` turns it off.
        public var probing: Probing?
        /// Hosts resolved in the background as soon as the resolver is created.
        public var preResolve: [String]
        /// Where the cache is persisted; loaded at creation, saved at ``HostResolver/shutdown()`` and every
        /// ``saveInterval``.
        public var cachePath: String?
        /// How often the cache is saved while running; `nil` saves only at shutdown.
        public var saveInterval: Duration?
        /// How short names are completed with search domains (default: no search).
        public var search: SearchPolicy
        /// Serve cached answers that another upstream gave (default `true`). `false` serves only answers whose
        /// ``RankedResolution/upstream`` is one of the current upstreams (or the fallback), and no cached negative
        /// answer: what a caller wants that named the upstream to ask, as `hostsctl resolve --server` does.
        public var servesAnswersFromOtherUpstreams: Bool = true
        /// Apply the private-address guard to every upstream (c-ares, the system resolver), not only to HTTP DNS
        /// providers (default `false`): an answer with a private, loopback, link-local, reserved or unspecified
        /// address fails the lookup with ``DNSError/Code/privateAddress``.
        public var guardsEveryUpstream: Bool = false

        /// Creates a configuration.
        public init(
            race: Bool = false,
            probing: Probing? = Probing(),
            preResolve: [String] = [],
            cachePath: String? = nil,
            saveInterval: Duration? = .seconds(300),
            search: SearchPolicy = .none
        ) {
            self.race = race
            self.probing = probing
            self.preResolve = preResolve
            self.cachePath = cachePath
            self.saveInterval = saveInterval
            self.search = search
        }
    }

    /// Why asking the upstreams failed: the error callers see, and what it says about the name.
    struct UpstreamFailure: Error {
        /// The error callers see: NXDOMAIN if any upstream said so, else no data, else the first error.
        var error: any Error
        /// Every upstream asked said NXDOMAIN or no data (none timed out or failed otherwise).
        var everyUpstreamDenied: Bool
        /// The chosen NXDOMAIN or no data came from an upstream whose negative answers are trusted.
        var authoritative: Bool

        var negative: DNSError? {
            guard let error = error as? DNSError, error.code.isNegativeAnswer else { return nil }
            return error
        }
    }

    struct FlightKey: Hashable, Sendable {
        var host: HostName
        var family: AddressFamily
        var fallback = false
    }

    /// What a settings reload may replace; read once per lookup.
    struct Pipeline: Sendable {
        var upstreams: [Upstream] { didSet { identities = Self.identities(upstreams, fallback) } }
        var fallback: Upstream? { didSet { identities = Self.identities(upstreams, fallback) } }
        var configuration: Configuration
        /// The identities of the upstreams and the fallback, kept with them: every cache hit asks whether its
        /// answer came from one of them.
        private(set) var identities: Set<String>

        init(upstreams: [Upstream], fallback: Upstream?, configuration: Configuration) {
            self.upstreams = upstreams
            self.fallback = fallback
            self.configuration = configuration
            identities = Self.identities(upstreams, fallback)
        }

        private static func identities(_ upstreams: [Upstream], _ fallback: Upstream?) -> Set<String> {
            Set((upstreams + [fallback].compactMap { $0 }).map(\.identity))
        }
    }

    /// The upstreams, in order.
    package var upstreams: [Upstream] { pipeline.withLock { $0.upstreams } }
    /// The source asked last, for the name as given, when every upstream says a name does not exist.
    package var fallback: Upstream? { pipeline.withLock { $0.fallback } }
    /// The override layer, if any.
    public let overrides: HostOverrides?
    /// The system hosts file layer (source ``ResolutionSource/hosts``), asked after the overrides.
    package let hosts: HostOverrides?
    /// The scored IP cache, if caching is on.
    public let cache: HostCache?
    /// The AsyncHTTPClient clients pinned to addresses, shared by the HTTP DNS upstreams built from settings and the
    /// interceptors and clients made on this resolver; closed at ``shutdown()``.
    package let clientPool: PinnedClientPool
    /// The policy.
    public var configuration: Configuration { pipeline.withLock { $0.configuration } }
    let pipeline: Locked<Pipeline>
    let prober: (any ConnectProber)?
    let logger: Logger
    let metrics: ResolverMetrics
    /// The files a settings-built resolver follows; `nil` for one built from parts.
    let localFiles = Locked<LocalFiles?>(nil)
    let tasks = BackgroundTasks()
    /// The periodic save, kept apart so that waiting for lookups and probes does not wait for it.
    let maintenance = BackgroundTasks()
    let flights: SingleFlight<FlightKey, RankedResolution>
    /// Lookups for a client network (``resolve(_:family:clientSubnet:)``), shared by every caller in that network.
    let subnetFlights: SingleFlight<SubnetFlightKey, SubnetAnswer?>
    let probesRunning = Atomic<Int>(0)
    /// Addresses with a probe in flight.
    let addressesBeingProbed = Locked<Set<IPAddress>>([])
    /// The resolvers whose periodic-save loop is running (for tests: a loop must end with its resolver).
    static let maintenanceLoops = Locked<Set<ObjectIdentifier>>([])
    /// Work run at shutdown: closing what the resolver owns. A settings reload replaces it.
    let cleanups: Locked<[@Sendable () async -> Void]>
    let shutDown = Atomic<Bool>(false)
    let configurationChanges = Atomic<UInt64>(0)
    /// The background refreshes allowed now and when the bucket was last filled.
    let refreshTokens = Locked<(tokens: Double, last: ContinuousClock.Instant?)>((0, nil))

    /// Creates a resolver from its parts.
    /// - Parameters:
    ///   - upstreams: The sources asked on a cache miss, in order; may be empty (overrides and cache only).
    ///   - overrides: The override layer.
    ///   - hosts: The system hosts file layer, asked after `overrides`.
    ///   - fallback: Asked last, for the name as given, when every upstream says the name does not exist (the
    ///     settings use the system resolver).
    ///   - cache: The IP cache; `nil` turns caching off (lookups still share upstream queries).
    ///   - configuration: Race mode, probing, pre-resolution and persistence.
    ///   - logger: Where the resolver logs; nothing is logged by default.
    ///   - metricsFactory: Where metrics go; by default the process's `MetricsSystem`.
    ///   - onShutdown: Work run at the end of ``shutdown()``, e.g. closing upstreams the caller handed over.
    public convenience init(
        upstreams: [Upstream],
        overrides: HostOverrides? = nil,
        hosts: HostOverrides? = nil,
        fallback: Upstream? = nil,
        cache: HostCache? = HostCache(),
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil,
        onShutdown: [@Sendable () async -> Void] = []
    ) {
        self.init(
            upstreams: upstreams, overrides: overrides, hosts: hosts, fallback: fallback, cache: cache,
            prober: TCPConnectProber(), configuration: configuration, logger: logger, metricsFactory: metricsFactory,
            onShutdown: onShutdown)
    }

    /// The same, with background probes by `prober` (`nil`: none).
    package convenience init(
        upstreams: [Upstream],
        overrides: HostOverrides? = nil,
        hosts: HostOverrides? = nil,
        fallback: Upstream? = nil,
        cache: HostCache? = HostCache(),
        prober: (any ConnectProber)?,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil,
        onShutdown: [@Sendable () async -> Void] = []
    ) {
        self.init(
            upstreams: upstreams, overrides: overrides, hosts: hosts, fallback: fallback, cache: cache, prober: prober,
            configuration: configuration, logger: logger, metricsFactory: metricsFactory, onShutdown: onShutdown,
            clientPool: PinnedClientPool(logger: logger))
    }

    /// Creates a resolver from its parts and the client pool its HTTP users share.
    package init(
        upstreams: [Upstream],
        overrides: HostOverrides?,
        hosts: HostOverrides?,
        fallback: Upstream?,
        cache: HostCache?,
        prober: (any ConnectProber)?,
        configuration: Configuration,
        logger: Logger,
        metricsFactory: (any MetricsFactory)?,
        onShutdown: [@Sendable () async -> Void],
        clientPool: PinnedClientPool
    ) {
        self.clientPool = clientPool
        self.pipeline = Locked(Pipeline(upstreams: upstreams, fallback: fallback, configuration: configuration))
        self.overrides = overrides
        self.hosts = hosts
        self.cache = cache
        self.prober = prober
        self.logger = logger
        self.metrics = ResolverMetrics(
            sources: (upstreams + [fallback].compactMap { $0 }).map(\.name),
            factory: metricsFactory ?? MetricsSystem.factory)
        self.flights = SingleFlight(tasks: tasks)
        self.subnetFlights = SingleFlight(tasks: tasks)
        self.cleanups = Locked(onShutdown)
        if let cache, let path = configuration.cachePath {
            cache.load(from: path, logger: logger)
        }
        if !configuration.preResolve.isEmpty {
            let hosts = configuration.preResolve
            tasks.spawn { [weak self] in await self?.preResolve(hosts) }
        }
        if cache != nil, configuration.cachePath != nil, let interval = configuration.saveInterval, interval > .zero {
            let id = ObjectIdentifier(self)
            Self.maintenanceLoops.withLock { _ = $0.insert(id) }
            maintenance.spawn { [weak self] in
                // Ends with the resolver, even one released without shutdown().
                defer { Self.maintenanceLoops.withLock { _ = $0.remove(id) } }
                while (try? await Task.sleep(for: interval)) != nil {
                    guard let self else { return }
                    self.saveCache()
                }
            }
        }
    }

    // MARK: Resolving

    /// Resolves `host` and returns the plain resolution (addresses in rank order).
    public func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        try await resolveRanked(host, family: family).resolution
    }

    /// Resolves a host given as text: overrides first (they may name any host, even `localhost`), then IP literals
    /// and `localhost` without a query, then the pipeline. A trailing dot (`orders.`) means the name is fully
    /// qualified: no search domain is tried.
    /// - Parameters:
    ///   - port: The port the caller will connect to; background probes of this host measure it.
    /// - Throws: ``DNSError`` (``DNSError/Code/badName`` for malformed names), `CancellationError`.
    public func resolveRanked(_ text: String, family: AddressFamily = .any, port: Int? = nil) async throws
        -> RankedResolution
    {
        if let overrides, let name = try? HostName(text),
            let answer = layerAnswer(overrides, name, family: family, port: port)
        {
            return answer
        }
        if let local = try LocalAnswers.answer(for: text, family: family) {
            return RankedResolution(unscored: local, family: family, freshness: .local)
        }
        let name = try HostName(text)
        if let port, let cache { cache.setProbePort(port, for: name) }
        return try await resolveRanked(name, family: family, probePort: port, absolute: text.hasSuffix("."))
    }

    /// Resolves `host` through the pipeline and returns the ranked answer.
    /// - Throws: ``DNSError`` when no layer has an answer (a cached NXDOMAIN or no data included),
    ///   ``DNSError/Code/notCached`` when the cache is the only layer and misses, `CancellationError`.
    public func resolveRanked(_ host: HostName, family: AddressFamily = .any) async throws -> RankedResolution {
        try await resolveRanked(host, family: family, probePort: nil, absolute: false)
    }

    /// ``resolveRanked(_:family:)``: the local layers for the name as given, then each search candidate through
    /// the cache and the upstreams, then the fallback. `probePort` is the port the caller connects to, which the
    /// first probe of a newly cached host uses (the cache has no record to remember it in before the answer
    /// arrives).
    func resolveRanked(
        _ host: HostName, family: AddressFamily, probePort: Int?, absolute: Bool
    ) async throws -> RankedResolution {
        for layer in [overrides, hosts] {
            if let layer, let answer = layerAnswer(layer, host, family: family, port: probePort) { return answer }
        }
        let (candidates, fallback) = pipeline.withLock {
            ($0.configuration.search.candidates(for: host, absolute: absolute), $0.fallback)
        }
        var asGiven: DNSError?
        var first: DNSError?
        for candidate in candidates {
            do {
                return try await resolveCandidate(candidate, family: family, probePort: probePort)
            } catch let error as DNSError where Self.nextCandidateCodes.contains(error.code) {
                // As the system resolver does: a name that does not exist under one domain may under the next.
                if candidate == host { asGiven = error }
                first = first ?? error
            }
        }
        let error = asGiven ?? first ?? DNSError(code: .notFound, message: "no candidate name", host: host.name)
        guard let fallback, error.code.isNegativeAnswer else { throw error }
        return try await askFallback(fallback, host: host, family: family, upstreamError: error)
    }

    /// The answers after which the next search candidate is tried (as the C library's resolver does); any other
    /// failure (a timeout, a transport error) ends the search.
    static let nextCandidateCodes: Set<DNSError.Code> = [.notFound, .noData, .serverFailure, .refused]

    /// Changes the pipeline's policy while running (race mode, probing, search, which cached answers are served).
    package func updateConfiguration(_ change: (inout Configuration) -> Void) {
        pipeline.withLock { change(&$0.configuration) }
        configurationChanges.add(1, ordering: .releasing)
    }

    /// A number that grows whenever what ``cachedRanked(_:family:port:)`` returns may change other than by time:
    /// the cache, the overrides, the hosts file or the configuration changed. Read it before a lookup; a copy of
    /// the answer is good for the `steadyFor` that ``cachedRankedSteadily(_:family:)`` gave while it is unchanged.
    package var answerGeneration: UInt64 {
        // Each counter only grows, so their sum changes whenever one does.
        configurationChanges.load(ordering: .acquiring) &+ (cache?.generation ?? 0) &+ (overrides?.generation ?? 0)
            &+ (hosts?.generation ?? 0)
    }

    /// The identities whose cached answers are served, or `nil` for any.
    var servedUpstreams: Set<String>? {
        pipeline.withLock { pipeline in
            pipeline.configuration.servesAnswersFromOtherUpstreams ? nil : pipeline.identities
        }
    }

    /// The cache, then the upstreams, for one fully qualified candidate name.
    func resolveCandidate(_ host: HostName, family: AddressFamily, probePort: Int?) async throws
        -> RankedResolution
    {
        switch cachedAnswer(host, family: family) {
        case .answer(let answer, _): return answer
        case .negative(let error): throw error
        case .miss: break
        }
        guard !upstreams.isEmpty else {
            throw DNSError(
                code: .notCached, message: "no usable answer in the cache and no upstream to ask", host: host.name)
        }
        return try await flights.run(FlightKey(host: host, family: family)) { [self] in
            try await fetch(host, family: family, isRefresh: false, probePort: probePort)
        }
    }

    /// What the cache holds for `host`, as the pipeline serves it: an answer (fresh or stale, refreshed and probed in
    /// the background as needed), a cached negative answer, or a miss (nothing usable, or only an answer from an
    /// upstream that is not served now).
    enum CachedAnswer {
        /// `steadyFor`: see ``HostCacheCore/Lookup/hit(_:refresh:probe:steadyFor:)``.
        case answer(RankedResolution, steadyFor: Duration?)
        case negative(DNSError)
        case miss
    }

    func cachedAnswer(_ host: HostName, family: AddressFamily) -> CachedAnswer {
        guard let cache else { return .miss }
        // One read of the pipeline for both (a cache hit is the hot path), copying only what is needed.
        let (probing, served) = pipeline.withLock { pipeline in
            (
                pipeline.configuration.probing,
                pipeline.configuration.servesAnswersFromOtherUpstreams ? nil : pipeline.identities
            )
        }
        let probeInterval = probeInterval(probing)
        switch cache.lookup(host, family: family, probeInterval: probeInterval) {
        case .hit(let answer, _, _, _) where served.map({ !$0.contains(answer.upstream ?? "") }) ?? false:
            metrics.misses.increment()
            return .miss
        case .negative where served != nil:
            metrics.misses.increment()
            return .miss
        case .hit(let answer, let refresh, let probe, let steadyFor):
            if answer.isStale {
                metrics.staleServes.increment()
                logger.debug(
                    "serving a stale answer", metadata: ["host": "\(host)", "staleSeconds": "\(answer.staleSeconds)"])
            } else {
                metrics.hits.increment()
            }
            if refresh { refreshInBackground(host, family: family) }
            if let probe { startProbe(probe) }
            return .answer(answer, steadyFor: steadyFor)
        case .negative(let error):
            metrics.negativeHits.increment()
            return .negative(error)
        case .miss:
            metrics.misses.increment()
            return .miss
        }
    }

    /// The ranked answer for `text` when it needs no waiting: from the overrides, a literal or `localhost`, the
    /// system hosts file, or the cache (for the first search candidate the cache answers). `nil` when an upstream
    /// must be asked; ``resolveRanked(_:family:port:)`` then does it. Callers on a hot path (the URL protocol, the
    /// AsyncHTTPClient front) try this first and so skip the time limit an upstream lookup needs.
    /// - Throws: ``DNSError`` for a name that is not valid.
    package func cachedRanked(_ text: String, family: AddressFamily = .any, port: Int? = nil) throws
        -> RankedResolution?
    {
        try cachedRankedSteadily(text, family: family, port: port)?.answer
    }

    /// ``cachedRanked(_:family:port:)``, and for an answer from the cache how long from now it stays the same
    /// (same TTL in whole seconds, same ranking, no refresh or probe due) unless ``answerGeneration`` changes;
    /// `nil` for answers from other layers and for stale answers. What ``hostsctl serve`` keeps encoded answers by.
    package func cachedRankedSteadily(_ text: String, family: AddressFamily = .any, port: Int? = nil) throws
        -> (answer: RankedResolution, steadyFor: Duration?)?
    {
        // The name is parsed once for every layer.
        let parsed = Result { () throws(DNSError) in try HostName(text) }
        if let overrides, case .success(let name) = parsed,
            let answer = layerAnswer(overrides, name, family: family, port: port)
        {
            return (answer, nil)
        }
        if let local = try LocalAnswers.answer(for: text, name: { try? parsed.get() }, family: family) {
            return (RankedResolution(unscored: local, family: family, freshness: .local), nil)
        }
        let host = try parsed.get()
        if let port, let cache { cache.setProbePort(port, for: host) }
        if let hosts, let answer = layerAnswer(hosts, host, family: family, port: port) { return (answer, nil) }
        // An absolute name is its only candidate (what hostsctl serve asks for every client): no search policy read.
        if text.utf8.last == UInt8(ascii: ".") {
            if case .answer(let answer, let steadyFor) = cachedAnswer(host, family: family) {
                return (answer, steadyFor)
            }
            return nil
        }
        let candidates = pipeline.withLock { $0.configuration.search.candidates(for: host, absolute: false) }
        for candidate in candidates {
            switch cachedAnswer(candidate, family: family) {
            case .answer(let answer, _): return (answer, nil)
            // The next search candidate may exist; the full path decides (and asks the fallback).
            case .negative: continue
            case .miss: return nil
            }
        }
        return nil
    }

    /// Asks the fallback for the name as given, after every upstream said it does not exist; its answer is cached
    /// under that name. When it fails too, the upstreams' error stands.
    func askFallback(
        _ fallback: Upstream, host: HostName, family: AddressFamily, upstreamError: DNSError
    ) async throws -> RankedResolution {
        let clock = ContinuousClock()
        return try await flights.run(FlightKey(host: host, family: family, fallback: true)) { [self] in
            let start = clock.now
            let resolution: Resolution
            do {
                resolution = try await fallback.resolver.resolve(host, family: family)
                metrics.recordUpstream(fallback.name, success: true, duration: clock.now - start)
            } catch let error as CancellationError {
                throw error
            } catch {
                metrics.recordUpstream(fallback.name, success: false, duration: clock.now - start)
                logger.debug("the fallback has no answer either", metadata: ["host": "\(host)", "error": "\(error)"])
                throw upstreamError
            }
            guard !resolution.addresses.isEmpty else { throw upstreamError }
            if configuration.guardsEveryUpstream { try Self.guardAddresses(resolution, from: fallback, host: host) }
            return store(resolution, host: host, family: family, upstream: fallback.identity, merge: false)
        }
    }

    /// The addresses a local layer (overrides, hosts file) gives `host`, ranked by the same scores as upstream
    /// answers (probed when first used, fed back by connects, backing off after failures); their order is all
    /// that changes, never the addresses.
    func layerAnswer(_ layer: HostOverrides, _ host: HostName, family: AddressFamily, port: Int?)
        -> RankedResolution?
    {
        guard let answer = layer.resolve(host, family: family) else { return nil }
        guard let cache else { return RankedResolution(unscored: answer, family: family, freshness: .override) }
        let (ranked, probe) = cache.rankExternal(
            host, family: family, addresses: answer.addresses.map(\.ip), port: port, probeInterval: probeIntervalIfIdle)
        if let probe { startProbe(probe) }
        return RankedResolution(
            host: answer.host, family: family, addresses: ranked, origin: answer.addresses.first?.source ?? .override,
            ttl: answer.addresses.map(\.ttl).min() ?? 0, freshness: .override)
    }

    /// The best address for `host`, resolving it if needed.
    public func bestAddress(for host: String, family: AddressFamily = .any) async throws -> IPAddress {
        guard let best = try await resolveRanked(host, family: family).best else {
            throw DNSError(code: .noData, message: "no address", host: host)
        }
        return best
    }

    /// Resolves `hosts` concurrently so later lookups hit the cache; failures are logged, not thrown.
    public func preResolve(_ hosts: [String], family: AddressFamily = .any) async {
        await withTaskGroup(of: Void.self) { group in
            for host in hosts {
                group.addTask { [self] in
                    do {
                        _ = try await resolveRanked(host, family: family)
                    } catch {
                        logger.info("pre-resolution failed", metadata: ["host": "\(host)", "error": "\(error)"])
                    }
                }
            }
        }
    }

    var probeIntervalIfIdle: Duration? { probeInterval(configuration.probing) }

    /// The probe interval when probing is on and below its limit of hosts at once.
    func probeInterval(_ probing: Probing?) -> Duration? {
        guard let probing, prober != nil, probesRunning.load(ordering: .relaxed) < probing.maximumConcurrentHosts
        else { return nil }
        return probing.interval
    }

    // MARK: Lifecycle

    /// Waits until background work started so far (refreshes, probes, pre-resolution) has ended. The periodic
    /// save is not waited for. Meant for command-line tools and tests.
    package func waitForBackgroundWork() async {
        await tasks.waitForAll()
    }

    /// Saves the cache to ``Configuration/cachePath`` now; failures are logged.
    public func saveCache() {
        guard let cache, let path = configuration.cachePath else { return }
        do {
            try cache.save(to: path)
        } catch {
            logger.warning("cannot save the cache", metadata: ["path": "\(path)", "error": "\(error.message)"])
        }
    }

    /// Stops background work, saves the cache and runs the shutdown work it was given. Lookups after this fail
    /// with ``DNSError/Code/shutdown`` when they need an upstream.
    public func shutdown() async {
        guard !shutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await maintenance.shutdown()
        await tasks.shutdown()
        saveCache()
        let cleanups = self.cleanups.withLock { $0 }
        for cleanup in cleanups { await cleanup() }
        await clientPool.shutdown()
    }
}
