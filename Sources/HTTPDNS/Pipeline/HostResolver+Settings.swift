public import CoreMetrics
public import Logging

extension HostResolver {
    /// Builds the pipeline a settings file describes: the layers of ``ResolverSettings/sources`` in order, the
    /// overrides file (watched for edits when ``ResolverSettings/reloadIntervalMilliseconds`` is set), the cache
    /// with its limits and persisted file, the HTTP DNS providers over one shared transport, c-ares, probing and
    /// pre-resolution. ``shutdown()`` saves the cache and closes everything built here.
    ///
    /// - Parameters:
    ///   - settings: The settings; adjust fields first to change the pipeline (e.g. `sources = [.cares]`).
    ///   - upstreams: When given, these replace the `httpdns` and `cares` layers of the settings (the caller
    ///     keeps ownership of them).
    ///   - prober: Measures connect times for background probes.
    ///   - clock: The cache's clocks.
    ///   - logger: Where the pipeline logs.
    ///   - metricsFactory: Where metrics go; by default the process's `MetricsSystem`.
    ///   - persistingCache: Whether the cache is loaded from and saved to its file (``ResolverSettings/cachePath``
    ///     or ``HostCache/defaultPath(environment:)``); `false` keeps it in memory only, e.g. for measurements.
    /// - Throws: ``DNSError/Code/invalidConfiguration`` for an unreadable overrides file, a bad provider or c-ares
    ///   options it cannot use.
    public convenience init(
        settings: ResolverSettings,
        upstreams: [Upstream]? = nil,
        prober: (any ConnectProber)? = TCPConnectProber(),
        clock: CacheClock = .system,
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil,
        persistingCache: Bool = true
    ) throws(DNSError) {
        var cleanups: [@Sendable () async -> Void] = []
        var built: [Upstream] = []
        do {
            var overrides: HostOverrides?
            if settings.sources.contains(.overrides), let path = settings.overridesFile {
                let (layer, watcher) = try Self.overrides(path: path, settings: settings, logger: logger)
                overrides = layer
                if let watcher { cleanups.append { watcher.stop() } }
            }
            if upstreams == nil {
                for source in settings.sources {
                    switch source {
                    case .overrides, .cache:
                        continue
                    case .httpdns:
                        let transport = try HTTPDNSTransport(
                            configuration: .init(
                                requestTimeout: .milliseconds(settings.httpTimeoutMilliseconds),
                                additionalTrustRoots: settings.trustCA
                            )
                        )
                        cleanups.append { await transport.shutdown() }
                        for provider in settings.providers {
                            let resolver = try HTTPDNSResolver(
                                configuration: try provider.resolverConfiguration(), transport: transport, logger: logger
                            )
                            built.append(Upstream(name: provider.name, kind: .httpDNS, resolver: resolver))
                        }
                    case .cares:
                        let resolver = try CAresResolver(
                            options: .init(
                                servers: settings.caresServers,
                                timeout: .milliseconds(settings.caresTimeoutMilliseconds),
                                tries: settings.caresTries,
                                useTCP: settings.caresTCP
                            ),
                            logger: logger
                        )
                        cleanups.append { resolver.shutdown() }
                        built.append(Upstream(name: "cares", kind: .cares, resolver: resolver))
                    }
                }
            }
            let useCache = settings.cacheEnabled && settings.sources.contains(.cache)
            let cache = useCache ? HostCache(configuration: HostCache.Configuration(settings: settings), clock: clock) : nil
            let probing = settings.probeEnabled
                ? Probing(
                    ports: settings.probePorts,
                    interval: .seconds(settings.probeIntervalSeconds),
                    timeout: .milliseconds(settings.probeTimeoutMilliseconds)
                )
                : nil
            self.init(
                upstreams: upstreams ?? built,
                overrides: overrides,
                cache: cache,
                prober: prober,
                configuration: Configuration(
                    race: settings.race,
                    probing: probing,
                    preResolve: settings.preResolve,
                    cachePath: useCache && persistingCache ? (settings.cachePath ?? HostCache.defaultPath()) : nil
                ),
                logger: logger,
                metricsFactory: metricsFactory,
                onShutdown: cleanups
            )
        } catch {
            // Close what was built before the failure.
            let pending = cleanups
            Task { for cleanup in pending { await cleanup() } }
            throw error
        }
    }

    /// Loads the overrides file (bad lines are logged and skipped) and watches it for edits.
    private static func overrides(
        path: String,
        settings: ResolverSettings,
        logger: Logger
    ) throws(DNSError) -> (HostOverrides, FileWatcher<OverrideTable>?) {
        let file: HostsFile
        do {
            file = try HostsFile(contentsOf: path)
        } catch {
            throw DNSError(code: .invalidConfiguration, message: error.message)
        }
        for diagnostic in file.diagnostics {
            logger.warning("overrides file line skipped", metadata: ["diagnostic": "\(diagnostic)"])
        }
        let overrides = HostOverrides(file: file.table, ttl: UInt32(settings.overridesTTL))
        guard settings.reloadIntervalMilliseconds > 0 else { return (overrides, nil) }
        do {
            let watcher = try overrides.watch(path: path, interval: .milliseconds(settings.reloadIntervalMilliseconds), logger: logger)
            return (overrides, watcher)
        } catch {
            // The lines that parsed are in use; edits are picked up once the file is clean.
            logger.warning("overrides file has errors; hot reload is off until restart", metadata: ["path": "\(path)"])
            return (overrides, nil)
        }
    }
}
