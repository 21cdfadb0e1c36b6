public import CoreMetrics
public import Logging
import Synchronization
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
package import HTTPDNSPinnedClients

/// The library's main entry point: resolves a host through overrides, the scored IP cache, the HTTP DNS
/// providers and c-ares, and ranks the addresses by measured connect speed.
///
/// Order of a lookup:
/// 1. **Overrides** (the overrides file and run-time entries), then **the system hosts file**, answer at once.
/// 2. Short names are completed with the **search domains** (`SearchPolicy`); each candidate name goes
///    through the next steps in turn, and the first with an answer wins.
/// 3. **The cache**: a fresh answer is returned at once (hot answers are refreshed in the background shortly
///    before they expire); an expired one within the maximum staleness is returned too while one background
///    refresh runs; a cached NXDOMAIN or no-data is thrown.
/// 4. **Upstreams** in order (HTTP DNS providers, then c-ares), the first answer wins; or, with
///    ``Configuration/race`` (`sources.race`), HTTP DNS and c-ares at once, the first good answer wins and the other still fills
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
/// let resolver = try HostResolver(configuration: settings, logger: logger)
/// let answer = try await resolver.resolveRanked("api.example.com")
/// print(answer.best, answer.addresses.map(\.score))
/// await resolver.shutdown()   // saves the cache
/// ```
public final class HostResolver: HostNameResolver {
    struct FlightKey: Hashable, Sendable {
        var host: HostName
        var family: AddressFamily
        var fallback = false
    }

    /// The resolver's mutable state, behind its one lock (``state``): what a settings reload may replace (read once
    /// per lookup), the files it follows, the probes in flight, the work run at shutdown and the refresh budget.
    /// Nothing is done while the lock is held but reading and writing these fields.
    struct State: Sendable {
        var upstreams: [Upstream] { didSet { identities = Self.identities(upstreams, fallback) } }
        var fallback: Upstream? { didSet { identities = Self.identities(upstreams, fallback) } }
        var configuration: Policy
        /// The identities of the upstreams and the fallback, kept with them: every cache hit asks whether its
        /// answer came from one of them.
        private(set) var identities: Set<String>
        /// The files a settings-built resolver follows; `nil` for one built from parts.
        var localFiles: LocalFiles?
        /// Probe claims and the refresh budget.
        var admissions = PipelineAdmissions()
        /// Work run at shutdown: closing what the resolver owns. A settings reload replaces it.
        var cleanups: [@Sendable () async -> Void]
        /// The watcher of the host's network, when the configuration asks for one.
        var networkMonitor: NetworkMonitor?
        /// Who listens to ``HostResolver/networkChanges()``, by subscription number.
        var networkListeners: [Int: AsyncStream<NetworkChange>.Continuation] = [:]
        var nextListener = 0

        init(
            upstreams: [Upstream], fallback: Upstream?, configuration: Policy,
            cleanups: [@Sendable () async -> Void]
        ) {
            self.upstreams = upstreams
            self.fallback = fallback
            self.configuration = configuration
            self.cleanups = cleanups
            identities = Self.identities(upstreams, fallback)
        }

        private static func identities(_ upstreams: [Upstream], _ fallback: Upstream?) -> Set<String> {
            Set((upstreams + [fallback].compactMap { $0 }).map(\.identity))
        }
    }

    /// The upstreams, in order.
    var upstreams: [Upstream] { state.withLock { $0.upstreams } }
    /// The source asked last, for the name as given, when every upstream says a name does not exist.
    var fallback: Upstream? { state.withLock { $0.fallback } }

    /// The longest a query of an upstream that cannot take queries back (c-ares) keeps going after its lookup is
    /// cancelled; zero when every upstream stops at once.
    package var longestUncancellableQuery: Duration {
        let all = state.withLock { $0.upstreams + [$0.fallback].compactMap { $0 } }
        return all.compactMap { ($0.resolver as? any UncancellableQueries)?.longestQuery }.max() ?? .zero
    }
    /// The override layer, if any.
    public let overrides: HostOverrides?
    /// The system hosts file layer (source ``ResolutionSource/hosts``), asked after the overrides.
    package let hosts: HostOverrides?
    /// The scored IP cache, if caching is on.
    @usableFromInline package let cache: HostCache?
    /// The AsyncHTTPClient clients pinned to addresses, shared by the HTTP DNS upstreams built from settings and the
    /// interceptors and clients made on this resolver; closed at ``shutdown()``.
    package let clientPool: PinnedClientPool
    /// What this host's network can reach (NAT64), applied to the answers handed out; `nil` for none.
    package let network: HostNetwork?
    /// The policy.
    package var policy: Policy { state.withLock { $0.configuration } }
    let state: Locked<State>
    let prober: (any ConnectProber)?
    let logger: Logger
    let metrics: ResolverMetrics
    let tasks = BackgroundTasks()
    /// The periodic save, kept apart so that waiting for lookups and probes does not wait for it.
    let maintenance = BackgroundTasks()
    let flights: SingleFlight<FlightKey, RankedResolution>
    /// Lookups for a client network (``resolve(_:family:clientSubnet:)``), shared by every caller in that network.
    let subnetFlights: SingleFlight<SubnetFlightKey, SubnetAnswer?>
    let probesRunning = Atomic<Int>(0)
    /// The resolvers whose periodic-save loop is running (for tests: a loop must end with its resolver).
    static let maintenanceLoops = Locked<Set<ObjectIdentifier>>([])
    let shutDown = Atomic<Bool>(false)
    let configurationChanges = Atomic<UInt64>(0)

    /// Creates a resolver from its parts.
    /// - Parameters:
    ///   - upstreams: The sources asked on a cache miss, in order; may be empty (overrides and cache only).
    ///   - overrides: The override layer.
    ///   - hosts: The system hosts file layer, asked after `overrides`.
    ///   - fallback: Asked last, for the name as given, when every upstream says the name does not exist (the
    ///     settings use the system resolver).
    ///   - cache: The IP cache; `nil` turns caching off (lookups still share upstream queries).
    ///   - configuration: What the pipeline does with its parts: ``Configuration/race``, probing
    ///     (``Configuration/probeEnabled``, ``Configuration/probe``), ``Configuration/preResolve``, persistence
    ///     (``Configuration/cachePath``, here `nil` means not persisted, and ``Configuration/cacheSaveInterval``),
    ///     the search domains of ``Configuration/cares``, ``Configuration/guardsEveryUpstream`` and
    ///     ``Configuration/network``. The layers, servers, providers and the cache's own settings are the parts'.
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
            policy: Policy(configuration, cachePath: configuration.cachePath), logger: logger,
            metricsFactory: metricsFactory, onShutdown: onShutdown,
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
        policy configuration: Policy,
        logger: Logger,
        metricsFactory: (any MetricsFactory)?,
        onShutdown: [@Sendable () async -> Void],
        clientPool: PinnedClientPool,
        network: HostNetwork? = nil
    ) {
        self.clientPool = clientPool
        self.state = Locked(
            State(upstreams: upstreams, fallback: fallback, configuration: configuration, cleanups: onShutdown))
        self.overrides = overrides
        self.hosts = hosts
        self.cache = cache
        self.prober = prober
        self.logger = logger
        // Tests give a network of their own (no IPv4 route, a DNS64 they describe).
        self.network = network ?? configuration.network.map { HostNetwork(configuration: $0, logger: logger) }
        self.metrics = ResolverMetrics(
            sources: (upstreams + [fallback].compactMap { $0 }).map(\.name),
            factory: metricsFactory ?? MetricsSystem.factory)
        self.flights = SingleFlight(tasks: tasks)
        self.subnetFlights = SingleFlight(tasks: tasks)
        if let cache, let path = configuration.cachePath {
            cache.load(from: path, logger: logger)
            // A file written without the guard (another process, other settings) may hold answers it withholds.
            if configuration.guardsEveryUpstream { cache.removeAnswers(handingOut: \.isNonPublic) }
        }
        if !configuration.preResolve.isEmpty {
            let hosts = configuration.preResolve
            tasks.spawn { [weak self] in await self?.preResolve(hosts) }
        }
        if configuration.watchesNetwork { startWatchingNetwork(namespace: configuration.networkNamespace) }
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
    ///   - text: The host name or IP literal, as written in a URL (no brackets, no port).
    ///   - family: The address family to resolve.
    ///   - port: The port the caller will connect to; background probes of this host measure it.
    /// - Throws: `HTTPDNSError` (`HTTPDNSError.Code.badName` for malformed names), `CancellationError`.
    public func resolveRanked(_ text: String, family: AddressFamily = .any, port: Int? = nil) async throws
        -> RankedResolution
    {
        if let overrides, let name = try? HostName(text),
            let answer = layerAnswer(overrides, name, family: family, port: port)
        {
            return needsAdapting(answer) ? try await adaptedToNetwork(answer) : answer
        }
        if let local = try LocalAnswers.answer(for: text, family: family) {
            return RankedResolution(unscored: local, family: family, freshness: .local)
        }
        let name = try HostName(text)
        if let port, let cache { cache.setProbePort(port, for: name) }
        let answer = try await resolveRanked(name, family: family, probePort: port, absolute: text.hasSuffix("."))
        return needsAdapting(answer) ? try await adaptedToNetwork(answer) : answer
    }

    /// Resolves `host` through the pipeline and returns the ranked answer.
    /// - Throws: `HTTPDNSError` when no layer has an answer (a cached NXDOMAIN or no data included),
    ///   `HTTPDNSError.Code.notCached` when the cache is the only layer and misses, `CancellationError`.
    @usableFromInline package func resolveRanked(_ host: HostName, family: AddressFamily = .any) async throws
        -> RankedResolution
    {
        let answer = try await resolveRanked(host, family: family, probePort: nil, absolute: false)
        return needsAdapting(answer) ? try await adaptedToNetwork(answer) : answer
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
        let (candidates, fallback) = state.withLock {
            ($0.configuration.search.candidates(for: host, absolute: absolute), $0.fallback)
        }
        var asGiven: HTTPDNSError?
        var first: HTTPDNSError?
        for candidate in candidates {
            do {
                return try await resolveCandidate(candidate, family: family, probePort: probePort)
            } catch let error as HTTPDNSError where Self.nextCandidateCodes.contains(error.code) {
                // As the system resolver does: a name that does not exist under one domain may under the next.
                if candidate == host { asGiven = error }
                first = first ?? error
            }
        }
        let error = asGiven ?? first ?? HTTPDNSError(code: .notFound, message: "no candidate name", host: host.name)
        guard let fallback, error.code.isNegativeAnswer else { throw error }
        return try await askFallback(fallback, host: host, family: family, upstreamError: error)
    }

    /// The answers after which the next search candidate is tried (as the C library's resolver does); any other
    /// failure (a timeout, a transport error) ends the search.
    static let nextCandidateCodes: Set<HTTPDNSError.Code> = [.notFound, .noData, .serverFailure, .refused]

    /// Changes the pipeline's policy while running (race mode, probing, search, which cached answers are served).
    package func updatePolicy(_ change: (inout Policy) -> Void) {
        state.withLock { change(&$0.configuration) }
        configurationChanges.add(1, ordering: .releasing)
    }

    /// A number that grows whenever what ``cachedRanked(_:family:port:)`` returns may change for any name other
    /// than by time: the overrides, the hosts file, the configuration or the whole cache changed (one name's
    /// changes count in ``nameVersion(_:)``). Read it before a lookup; a copy of
    /// the answer is good for the `steadyFor` that ``cachedRankedSteadily(_:family:)`` gave while it is unchanged.
    package var answerGeneration: UInt64 {
        // Each counter only grows, so their sum changes whenever one does.
        configurationChanges.load(ordering: .acquiring) &+ (cache?.generation ?? 0) &+ (overrides?.generation ?? 0)
            &+ (hosts?.generation ?? 0)
    }

    /// The counter of changes of the names at `slot` (`NameVersions.slot(for:)`) in the cache: with
    /// ``answerGeneration``, what a kept copy of one name's answer depends on (0 without a cache).
    package func nameVersion(_ slot: Int) -> UInt64 {
        cache?.names.version(slot) ?? 0
    }

    /// How each upstream (and the fallback) has fared: its last answer and failure, and failures in a row; the
    /// upstreams configured now are listed even before they are first asked.
    package var upstreamHealth: [UpstreamHealth.Record] {
        let known = state.withLock { state in (state.upstreams + [state.fallback].compactMap { $0 }).map(\.name) }
        return metrics.health.records(known: known)
    }

    /// The identities whose cached answers are served, or `nil` for any.
    var servedUpstreams: Set<String>? {
        state.withLock { state in
            state.configuration.servesAnswersFromOtherUpstreams ? nil : state.identities
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
            throw HTTPDNSError(
                code: .notCached, message: "no usable answer in the cache and no upstream to ask", host: host.name)
        }
        return try await flights.run(FlightKey(host: host, family: family)) { [self] in
            try await fetch(host, family: family, isRefresh: false, probePort: probePort)
        }
    }

    /// The best address for `host`, resolving it if needed.
    func bestAddress(for host: String, family: AddressFamily = .any) async throws -> IPAddress {
        guard let best = try await resolveRanked(host, family: family).best else {
            throw HTTPDNSError(code: .noData, message: "no address", host: host)
        }
        return best
    }

    /// Resolves `hosts` concurrently so later lookups hit the cache; failures are logged, not thrown.
    func preResolve(_ hosts: [String], family: AddressFamily = .any) async {
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

    var probeIntervalIfIdle: Duration? { probeInterval(policy.probing) }

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
    @usableFromInline package func saveCache() {
        guard let cache, let path = policy.cachePath else { return }
        do {
            try cache.save(to: path)
        } catch {
            logger.warning("cannot save the cache", metadata: ["path": "\(path)", "error": "\(error.message)"])
        }
    }

    /// Stops background work, saves the cache and runs the shutdown work it was given. Lookups after this fail
    /// with `HTTPDNSError.Code.shutdown` when they need an upstream.
    public func shutdown() async {
        guard !shutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stopWatchingNetwork()
        await maintenance.shutdown()
        await tasks.shutdown()
        saveCache()
        let cleanups = state.withLock { $0.cleanups }
        for cleanup in cleanups { await cleanup() }
        await clientPool.shutdown()
    }
}
