public import CoreMetrics
public import Logging
import Synchronization
public import HTTPDNSCore
package import HTTPDNSCAres
package import HTTPDNSClients
package import NIOCore
import NIOPosix
import HTTPDNSPinnedClients

extension HostResolver {
    /// Builds the pipeline a configuration (a settings file, any `ConfigReader`) describes: the overrides layer (always present, so run-time overrides
    /// work without a file; its file watched for edits when `reload.intervalMs` is
    /// set), the system hosts file layer, the search policy, the cache with its limits and persisted file, the
    /// upstreams of `Configuration.sources` in order (the HTTP DNS providers over one shared transport,
    /// c-ares, the system resolver), the system-resolver fallback, probing and pre-resolution. ``shutdown()`` saves
    /// the cache and closes everything built here. ``apply(_:)`` changes all of it while running.
    ///
    /// - Parameters:
    ///   - settings: The configuration; adjust fields first to change the pipeline (e.g. `sources = [.cares]`).
    ///   - upstreams: When given, these replace the upstream layers of the settings (the caller keeps ownership of
    ///     them) and no fallback is asked: the caller named what answers.
    ///   - logger: Where the pipeline logs.
    ///   - metricsFactory: Where metrics go; by default the process's `MetricsSystem`.
    ///   - persistingCache: Whether the cache is loaded from and saved to its file (`Configuration.cachePath`
    ///     or ``HostCache/defaultPath(environment:)``); `false` keeps it in memory only, e.g. for measurements.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for an unreadable overrides file, a bad provider or c-ares
    ///   options it cannot use.
    public convenience init(
        configuration settings: Configuration,
        upstreams: [Upstream]? = nil,
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil,
        persistingCache: Bool = true
    ) throws(HTTPDNSError) {
        try self.init(
            configuration: settings, upstreams: upstreams, prober: TCPConnectProber(), clock: .system, logger: logger,
            metricsFactory: metricsFactory, persistingCache: persistingCache)
    }

    /// The same, with background probes by `prober` (`nil`: none) and the cache reading `clock` (tests pass one
    /// they control).
    package convenience init(
        configuration settings: Configuration,
        upstreams: [Upstream]? = nil,
        prober: (any ConnectProber)?,
        clock: CacheClock = .system,
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil,
        persistingCache: Bool = true
    ) throws(HTTPDNSError) {
        try settings.check(buildsUpstreams: upstreams == nil)
        let overrides = HostOverrides(ttl: UInt32(settings.files.overridesTTL))
        let hosts = HostOverrides(ttl: UInt32(settings.files.overridesTTL), source: .hosts)
        let files = LocalFiles()
        do {
            try files.follow(settings, overrides: overrides, hosts: hosts, logger: logger)
        } catch {
            files.stop()
            throw error
        }
        let pool = PinnedClientPool(logger: logger)
        var parts = Parts(upstreams: upstreams ?? [], fallback: nil, cleanups: [])
        if upstreams == nil {
            do {
                parts = try Self.buildUpstreams(
                    settings, pool: pool, logger: logger, metricsFactory: metricsFactory ?? MetricsSystem.factory)
            } catch {
                files.stop()
                throw error
            }
        }
        let useCache = settings.cacheEnabled && settings.sources.contains(.cache)
        let cache =
            useCache ? HostCache(configuration: settings.cache, clock: clock) : nil
        let cachePath = useCache && persistingCache ? (settings.cachePath ?? HostCache.defaultPath()) : nil
        self.init(
            upstreams: parts.upstreams,
            overrides: overrides,
            hosts: hosts,
            fallback: parts.fallback,
            cache: cache,
            prober: prober,
            policy: Policy(settings, cachePath: cachePath),
            logger: logger,
            metricsFactory: metricsFactory,
            onShutdown: parts.cleanups + [{ files.stop() }],
            clientPool: pool
        )
        files.adopt(settings: settings, fixedUpstreams: upstreams != nil)
        state.withLock { $0.localFiles = files }
    }

    /// Applies edited settings to the running resolver: sources and their order, c-ares servers and timeouts,
    /// search domains and ndots, the HTTP DNS providers, the fallback, the overrides and hosts files and their
    /// reload interval, the cache's TTL bounds, staleness, host limit and dual-stack policy, probing and race mode.
    ///
    /// New upstreams are built before anything changes, so settings that cannot be used leave the resolver as it
    /// was; the old upstreams are closed once the lookups they are answering have had time to end. The cache keeps
    /// its entries (turning it off or on, its file, its save interval and the overrides TTL take a restart). A resolver made with
    /// explicit upstreams keeps them.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` when the new settings cannot be built; nothing changed.
    /// Reads the overrides and hosts files now if they changed: what a reload whose settings are the same as before
    /// still does, without rebuilding the upstreams (which would also forget every negative answer).
    package func checkLocalFilesNow() {
        state.withLock { $0.localFiles }?.checkNow()
    }

    public func apply(_ settings: Configuration) throws(HTTPDNSError) {
        guard let files = state.withLock({ $0.localFiles }) else {
            throw HTTPDNSError(
                code: .invalidConfiguration, message: "only a resolver built from settings can apply settings")
        }
        try settings.check(buildsUpstreams: !files.fixedUpstreams)
        let previous = files.settings
        let parts =
            files.fixedUpstreams
            ? nil
            : try Self.buildUpstreams(settings, pool: clientPool, logger: logger, metricsFactory: metrics.factory)
        if let overrides, let hosts {
            try files.follow(settings, overrides: overrides, hosts: hosts, logger: logger)
        }
        if let cache {
            cache.updateConfiguration(settings.cache)
            // The guard turned on: answers accepted without it are not served any longer.
            if settings.guardsEveryUpstream, !(files.settings?.guardsEveryUpstream ?? false) {
                cache.removeAnswers(handingOut: \.isNonPublic)
            }
        }
        state.withLock { state in
            var policy = Policy(settings, cachePath: state.configuration.cachePath)
            policy.preResolve = []
            policy.servesAnswersFromOtherUpstreams = state.configuration.servesAnswersFromOtherUpstreams
            state.configuration = policy
            if let parts {
                state.upstreams = parts.upstreams
                state.fallback = parts.fallback
            }
        }
        files.adopt(settings: settings, fixedUpstreams: files.fixedUpstreams)
        guard let parts else { return }
        // "Does not exist" came from the upstreams just replaced; the new ones may know better.
        cache?.removeNegativeAnswers()
        let retired = state.withLock { state in
            defer { state.cleanups = parts.cleanups + [{ files.stop() }] }
            return state.cleanups
        }
        // Lookups still on the old upstreams get their whole time before those close.
        let caresTime = (previous?.cares.timeout ?? .zero) * ((previous?.cares.tries ?? 1) * 2)
        let grace = max(previous?.httpDNSTransport.requestTimeout ?? .zero, caresTime) + .milliseconds(500)
        retire(retired, after: grace)
        logger.notice("settings applied", metadata: ["sources": "\(settings.sources.map(\.rawValue))"])
    }

    /// The settings this resolver was built from or last applied; `nil` for one built from parts.
    package var appliedSettings: Configuration? { state.withLock { $0.localFiles }?.settings }

    /// The parts a settings file builds and the resolver then owns.
    struct Parts {
        var upstreams: [Upstream]
        var fallback: Upstream?
        var cleanups: [@Sendable () async -> Void]
    }

    /// Builds the upstream layers of `settings` in order, and the system fallback when it is on and `system` is not
    /// a layer already. The HTTP DNS transport takes its HTTP/1.1 clients from `pool`. On failure, what was built is
    /// closed.
    static func buildUpstreams(
        _ settings: Configuration, pool: PinnedClientPool, logger: Logger, metricsFactory: any MetricsFactory
    ) throws(HTTPDNSError)
        -> Parts
    {
        var parts = Parts(upstreams: [], fallback: nil, cleanups: [])
        do {
            for source in settings.upstreamSources {
                switch source {
                case .httpdns:
                    let transport = try HTTPDNSTransport(
                        configuration: settings.httpDNSTransport,
                        pool: pool, ownsPool: false, eventLoopGroup: pool.eventLoopGroup, logger: logger
                    )
                    parts.cleanups.append { await transport.shutdown() }
                    for var provider in settings.httpDNSProviders {
                        if provider.budget == nil { provider.budget = settings.httpDNSBudget }
                        let resolver = try HTTPDNSResolver(
                            configuration: provider, transport: transport, logger: logger)
                        // Vendor APIs answer an empty list when they throttle too: their negatives are not trusted.
                        parts.upstreams.append(
                            Upstream(
                                name: provider.name, kind: .httpDNS, resolver: resolver,
                                identity: "\(provider.name)(\(provider.endpoints.map(\.url).joined(separator: ",")))",
                                negativeAnswersAreAuthoritative: provider.negativeAnswersAreAuthoritative,
                                trusted: settings.trustedSources.contains(.httpdns)))
                    }
                case .cares:
                    let servers =
                        settings.cares.servers.isEmpty
                        ? "system" : settings.cares.servers.map(\.description).joined(separator: ",")
                    let resolver: any HostNameResolver
                    if let plain = try ownSockets(
                        settings.cares, eventLoopGroup: PlainDNSClient.upstreamEventLoopGroup, logger: logger,
                        metricsFactory: metricsFactory)
                    {
                        resolver = plain
                        parts.cleanups.append { plain.shutdown() }
                    } else {
                        let cares = try CAresResolver(configuration: settings.cares, logger: logger)
                        resolver = cares
                        parts.cleanups.append { cares.shutdown() }
                    }
                    parts.upstreams.append(
                        Upstream(
                            name: "cares", kind: .cares, resolver: resolver, identity: "cares(\(servers))",
                            trusted: settings.trustedSources.contains(.cares)))
                case .system:
                    parts.upstreams.append(try systemUpstream(settings, cleanups: &parts.cleanups))
                case .overrides, .hosts, .cache:
                    continue
                }
            }
            if settings.systemFallback, !settings.sources.contains(.system) {
                parts.fallback = try systemUpstream(settings, cleanups: &parts.cleanups)
            }
            return parts
        } catch {
            let pending = parts.cleanups
            Task { for cleanup in pending { await cleanup() } }
            throw error
        }
    }

    /// The classic upstream on the server's own sockets when `cares` asks for them
    /// (``CAresResolver/Configuration/usesOwnSockets``) and servers are known (its own, or resolv.conf's); `nil`
    /// for c-ares.
    /// Datagrams those sockets drop are counted in `httpdns_serve_upstream_mismatched_total` by reason (`id`: no
    /// query waits with that ID; `question`: the ID of a waiting query with another question, as a forger who
    /// guessed the port and ID but not the case sends).
    ///
    /// Lookups go out from `eventLoopGroup`'s loop when a task asks, and from the loop of `servingGroup` (by default
    /// NIO's shared group, which `hostsctl serve` listens on) that received a query when that loop asks itself
    /// (``resolveOnLoop(_:family:on:completion:)``).
    package static func ownSockets(
        _ cares: CAresResolver.Configuration, eventLoopGroup: any EventLoopGroup,
        servingGroup: (any EventLoopGroup)? = MultiThreadedEventLoopGroup.singleton, logger: Logger,
        metricsFactory: any MetricsFactory
    ) throws(HTTPDNSError) -> PlainDNSResolver? {
        guard cares.usesOwnSockets else { return nil }
        let servers = cares.servers.isEmpty ? PlainDNSResolver.systemServers() : cares.servers
        guard !servers.isEmpty else { return nil }
        let label = "httpdns_serve_upstream_mismatched_total"
        let ids = Counter(label: label, dimensions: [("reason", "id")], factory: metricsFactory)
        let questions = Counter(label: label, dimensions: [("reason", "question")], factory: metricsFactory)
        return try PlainDNSResolver(
            configuration: .init(servers: servers, timeout: cares.timeout, tries: cares.tries, tcpOnly: cares.useTCP),
            eventLoopGroup: eventLoopGroup, servingGroup: servingGroup, logger: logger,
            mismatched: { reason in (reason == .id ? ids : questions).increment() })
    }

    private static func systemUpstream(
        _ settings: Configuration, cleanups: inout [@Sendable () async -> Void]
    ) throws(HTTPDNSError) -> Upstream {
        let resolver = try SystemResolver(configuration: settings.system)
        cleanups.append { await resolver.shutdown() }
        return Upstream(
            name: "system", kind: .other, resolver: resolver, trusted: settings.trustedSources.contains(.system))
    }
}

/// The files a settings-built resolver follows (the overrides file and the system hosts file) and the settings
/// they came from.
final class LocalFiles: Sendable {
    private struct State {
        var settings: HostResolver.Configuration?
        var fixedUpstreams = false
        var overrides: FileWatcher<OverrideTable>?
        var hosts: FileWatcher<OverrideTable>?
    }

    private let state = Locked(State())

    /// The settings last applied.
    var settings: HostResolver.Configuration? { state.withLock { $0.settings } }
    /// Whether the resolver was given its upstreams (a reload leaves them).
    var fixedUpstreams: Bool { state.withLock { $0.fixedUpstreams } }

    func adopt(settings: HostResolver.Configuration, fixedUpstreams: Bool) {
        state.withLock {
            $0.settings = settings
            $0.fixedUpstreams = fixedUpstreams
        }
    }

    /// Loads (and watches) the files `settings` name into the two layers; a layer not in the sources, or without a
    /// file, gets an empty table. Files that did not change keep their watchers.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` when the overrides file cannot be read.
    func follow(_ settings: HostResolver.Configuration, overrides: HostOverrides, hosts: HostOverrides, logger: Logger)
        throws(HTTPDNSError)
    {
        let interval = Duration.milliseconds(settings.files.reloadIntervalMilliseconds)
        let previous = state.withLock { $0.settings }
        let sameInterval = previous?.files.reloadIntervalMilliseconds == settings.files.reloadIntervalMilliseconds
        let overridesPath = settings.sources.contains(.overrides) ? settings.files.overridesFile : nil
        let hostsPath = settings.sources.contains(.hosts) ? settings.files.hostsFile : nil
        var newOverrides: FileWatcher<OverrideTable>??
        if !(sameInterval && overridesPath == state.withLock({ $0.overrides?.path })) {
            if let overridesPath {
                do {
                    newOverrides = .some(try overrides.watch(path: overridesPath, interval: interval, logger: logger))
                } catch var error as HTTPDNSError {
                    // The file's own error, with its positions and cause: only the code is the settings' one.
                    error.code = .invalidConfiguration
                    throw error
                } catch {
                    throw HTTPDNSError(code: .invalidConfiguration, message: "\(error)", source: error)
                }
            } else {
                newOverrides = .some(nil)
            }
        }
        var newHosts: FileWatcher<OverrideTable>??
        if !(sameInterval && hostsPath == state.withLock({ $0.hosts?.path })) {
            // The system hosts file is read like the C library reads it: bad lines skipped, a missing file empty.
            newHosts = .some(
                hostsPath.flatMap { try? hosts.watch(path: $0, interval: interval, strict: false, logger: logger) })
        }
        let stale: [FileWatcher<OverrideTable>] = state.withLock { state in
            var stale: [FileWatcher<OverrideTable>] = []
            if let newOverrides {
                if let old = state.overrides { stale.append(old) }
                state.overrides = newOverrides
            }
            if let newHosts {
                if let old = state.hosts { stale.append(old) }
                state.hosts = newHosts
            }
            return stale
        }
        for watcher in stale { watcher.stop() }
        if case .some(.none) = newOverrides { overrides.replaceFileTable(OverrideTable()) }
        if case .some(.none) = newHosts { hosts.replaceFileTable(OverrideTable()) }
    }

    /// Checks both files now and reloads those that changed (a reload whose settings did not change).
    func checkNow() {
        let watchers = state.withLock { [$0.overrides, $0.hosts].compactMap { $0 } }
        for watcher in watchers { watcher.checkNow() }
    }

    /// Stops watching both files.
    func stop() {
        let watchers = state.withLock { state in
            defer {
                state.overrides = nil
                state.hosts = nil
            }
            return [state.overrides, state.hosts].compactMap { $0 }
        }
        for watcher in watchers { watcher.stop() }
    }
}
