import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSServer
import CoreMetrics
import Logging
import Prometheus
import ServiceLifecycle
import UnixSignals

/// `hostsctl serve`: answers HTTP DNS (RFC 8484 DoH, the JSON API, Alibaba- and Tencent-compatible APIs) from the
/// configured pipeline until SIGINT or SIGTERM, then shuts down gracefully.
struct ServeCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Answer HTTP DNS (DoH, JSON, vendor APIs) from the resolver pipeline.",
        discussion: """
            Endpoints: /dns-query (RFC 8484, GET ?dns= and POST application/dns-message), /resolve?name=&type=
            (application/dns-json), /ACCOUNT/d?host= and /ACCOUNT/sign_d?host=&t=&s= (Alibaba-compatible; accounts from
            serve.accounts), /d?dn= (Tencent-compatible), /healthz and /readyz; /metrics (Prometheus) on the admin
            listener only (serve.admin.listen, 127.0.0.1:8054 by default). With
            serve.certificate and serve.privateKey the server speaks TLS with HTTP/2 and HTTP/1.1; otherwise plain
            HTTP/1.1. Edits of the settings file (every reload.intervalMs) and SIGHUP apply new settings and overrides
            without dropping connections (the listen address, certificate and connection limits need a restart).
            SIGINT or SIGTERM: /readyz answers 503, requests in progress finish (5 s at most), the cache is saved.
            Access logs (one line per request, client networks only) at HOSTSCTL_LOG_LEVEL=info.
            """
    )

    /// The settings file.
    @Option(help: "The settings file (default: $HOSTSCTL_CONFIG, else the defaults).")
    var config: String?

    /// Overrides `serve.listen`.
    @Option(help: "The address and port to listen on, IP:PORT (default: serve.listen, 127.0.0.1:8053).")
    var listen: String?

    /// Creates the command (used by the argument parser).
    init() {}

    /// Serves until a signal arrives.
    func run() async throws {
        let loaded = try SettingsLoading.settings(config)
        let serve = try loaded.read(ServeSettings.section)
        let settings = Self.served(loaded.resolver, serve: serve)
        var listener = serve.server
        if let listen { listener.listen = try ServerAddress(listening: listen) }
        try Self.checkAccounts(serve)
        let logger = CommandLogging.logger()
        Self.raiseDescriptorLimit(
            for: listener.maximumConnections + (listener.adminListen == nil ? 0 : listener.maximumAdminConnections),
            logger: logger)
        // The process's own registry, for the resolver and the service (MetricsSystem is left alone).
        let registry = PrometheusCollectorRegistry()
        let memory = ProcessMemory(registry: registry)
        let (metrics, telemetry) = try Self.observability(loaded, registry: registry, logger: logger)
        let resolver = try HostResolver(configuration: settings, logger: logger, metricsFactory: metrics)
        let forwarder: ReloadingCAresForwarder
        do {
            forwarder = try ReloadingCAresForwarder(
                configuration: settings.cares, logger: logger, metricsFactory: metrics)
        } catch {
            await resolver.shutdown()
            throw error
        }
        let service = HTTPDNSService(
            resolver: resolver, configuration: serve.service, logger: logger,
            metricsFactory: metrics, forwarder: forwarder,
            metricsExporter: {
                memory.update()
                return registry.emitToBuffer()
            }, tracer: telemetry.tracer)
        // What client networks reported lives beside the cache file, saved with it (at the resolver's save
        // interval and on shutdown).
        let scoresPath = resolver.policy.cachePath.map(NetworkScores.path(forCache:))
        if let scoresPath { service.loadNetworkScores(from: scoresPath) }
        let saving = Task {
            guard let scoresPath, let interval = resolver.policy.saveInterval, interval > .zero else { return }
            while (try? await Task.sleep(for: interval)) != nil { Self.save(service, to: scoresPath, logger: logger) }
        }
        defer { saving.cancel() }
        let server: HTTPDNSServer
        do {
            server = try await HTTPDNSServer.start(
                service: service, configuration: listener, logger: logger)
        } catch {
            forwarder.shutdown()
            await resolver.shutdown()
            throw error
        }
        let scheme = listener.certificatePath == nil ? "http" : "https"
        let address = listener.listen
        let host = address.ip.family == .ipv6 ? "[\(address.ip)]" : address.ip.description
        // Written unbuffered, so a supervisor reading a pipe sees it at once.
        FileHandle.standardOutput.write(
            Data("hostsctl serve: \(scheme)://\(host):\(server.port)/dns-query (Ctrl-C stops)\n".utf8))
        if let adminPort = server.adminPort, let admin = listener.adminListen {
            let adminHost = admin.ip.family == .ipv6 ? "[\(admin.ip)]" : admin.ip.description
            FileHandle.standardOutput.write(
                Data("hostsctl serve: metrics http://\(adminHost):\(adminPort)/metrics\n".utf8))
        }

        let reloader = SettingsReloader(
            path: SettingsLoading.chosenPath(config), initial: loaded, serve: serve, resolver: resolver,
            service: service, forwarder: forwarder, logger: logger)
        reloader.start(interval: settings.files.reloadIntervalMilliseconds)
        service.setControl(
            ServiceControl(
                version: HostsCTLVersion.current, settingsFile: SettingsLoading.chosenPath(config),
                reload: { reloader.reloadNow(trigger: "control") }, lastReload: { reloader.lastReload }))
        let group = Self.serviceGroup(server, exporters: telemetry.services, logger: logger)
        do {
            try await group.run()
        } catch {
            logger.error("serving stopped", metadata: ["error": "\(error)"])
        }
        reloader.stop()
        if let scoresPath { Self.save(service, to: scoresPath, logger: logger) }
        forwarder.shutdown()
        await resolver.shutdown()
    }

    /// The server and the telemetry exporters, stopped by SIGTERM or SIGINT. A group shuts its services down last to
    /// first: the server stops answering, then the exporters send what is left. An exporter that ends or fails never
    /// takes the server down with it.
    static func serviceGroup(_ server: HTTPDNSServer, exporters: [any Service], logger: Logger) -> ServiceGroup {
        let exporters = exporters.map {
            ServiceGroupConfiguration.ServiceConfiguration(
                service: $0, successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore)
        }
        return ServiceGroup(
            configuration: .init(
                services: exporters + [.init(service: server)], gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
    }

    private static func save(_ service: HTTPDNSService, to path: String, logger: Logger) {
        do {
            try service.saveNetworkScores(to: path)
        } catch {
            logger.warning("cannot save the network scores", metadata: ["error": "\(error)"])
        }
    }

    /// Raises the soft limit on open descriptors towards the hard one so that `maximumConnections` connections fit
    /// with room for the resolver's sockets and files (as servers commonly do at start); warns when even the hard
    /// limit is lower, since accepting would then fail before the connection limit is reached.
    static func raiseDescriptorLimit(for maximumConnections: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(maximumConnections + 256)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        if limit.rlim_cur < wanted {
            logger.warning(
                "the open-file limit is below serve.maxConnections plus room for the resolver; lower serve.maxConnections or raise the limit (ulimit -n)",
                metadata: ["limit": "\(limit.rlim_cur)", "maxConnections": "\(maximumConnections)"])
        }
    }

    /// `settings` as a server facing the internet applies them: served answers never come from the operating
    /// system's resolver (`sources.systemFallback` is off and a `system` layer is dropped: getaddrinfo has a few
    /// threads and an unbounded queue, and asks mDNS and LLMNR on the server's own network, so clients' names
    /// must not reach it); unless `serve.probeGuardedAddresses`, the private-address guard covers every upstream
    /// and no probe connects to a private, loopback, link-local or otherwise non-public address, so no client's
    /// question can make the server reach into its own network. Overrides, which the operator writes, are answered
    /// as written. Classic queries leave on the server's own sockets (`PlainDNSClient`), with DNS 0x20.
    static func served(_ settings: HostResolver.Configuration, serve: ServeSettings)
        -> HostResolver.Configuration
    {
        var served = settings
        // Answers are for clients on other networks: never adapted to this host's (NAT64).
        served.adaptsToHostNetwork = false
        served.systemFallback = false
        served.sources.removeAll { $0 == .system }
        // Every classic query the server sends leaves on its own sockets (random ports, IDs and case; answers
        // matched byte for byte), or through c-ares with DNS 0x20 where no server is known (docs/security.md).
        served.cares.randomizesCase = true
        served.cares.usesOwnSockets = true
        guard !serve.service.probesGuardedAddresses else { return served }
        served.guardsEveryUpstream = true
        served.probe.probesGuardedAddresses = false
        return served
    }

    /// Where the command's metrics go (`registry`, and OpenTelemetry export's factory too when the `otel` section
    /// turns it on), and the export itself (off by default), whose tracer gets a span per request.
    static func observability(
        _ settings: Settings, registry: PrometheusCollectorRegistry, logger: Logger
    ) throws -> (any MetricsFactory, Telemetry) {
        let telemetry = try Telemetry.start(
            settings.read(Telemetry.Configuration.section),
            durationBuckets: ["httpdns_serve_request_duration_seconds": answerTimeBuckets], logger: logger)
        let prometheus = metricsFactory(registry)
        let metrics: any MetricsFactory =
            telemetry.metricsFactory.map { MultiplexMetricsHandler(factories: [prometheus, $0]) } ?? prometheus
        return (metrics, telemetry)
    }

    /// The factory of the process's metrics, over `registry`. Answers from the cache take tens of microseconds: the
    /// default buckets (5 ms and up) would put every one in the first bucket, and the dashboard's and the alerts'
    /// percentiles would say nothing, so the answer-time histogram has ``answerTimeBuckets``.
    static func metricsFactory(_ registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["httpdns_serve_request_duration_seconds"] = answerTimeBuckets
        return factory
    }

    /// The buckets of the answer-time histogram: 50 µs to 10 s, about two and a half per decade.
    static let answerTimeBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
        .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .microseconds(2_500_000), .seconds(5),
        .seconds(10),
    ]

    /// Refuses settings with a signed-only account whose secret variable is not set (the service would refuse
    /// every request for it).
    /// - Throws: `ValidationError` naming the account and the variable.
    static func checkAccounts(_ serve: ServeSettings) throws {
        guard let account = serve.service.accountsWithoutSecret.first else { return }
        let variable = serve.service.secretVariables[account] ?? "?"
        throw ValidationError("account \(account): the environment variable \(variable) is not set")
    }
}

/// Applies edits of the settings file (checked every `reload.intervalMs`) and, on SIGHUP, the file and the
/// `HOSTSCTL_*` environment again, to the running resolver and service. A broken edit keeps the last good settings.
final class SettingsReloader: Sendable {
    private let path: String?
    private let resolver: HostResolver
    private let service: HTTPDNSService
    /// The relay of other types, moved to the new `cares.*` settings with the resolver.
    private let forwarder: ReloadingCAresForwarder?
    private let logger: Logger
    private let watcher: FileWatcher<Settings>?
    /// The `serve` section last applied, to tell which edits wait for a restart.
    private let applied: Locked<ServeSettings>
    private let hangUp: Locked<Task<Void, Never>?> = Locked(nil)
    private let last = Locked<ReloadRecord?>(nil)
    /// The bytes of the settings file last applied, behind the lock that runs one reload at a time (the file
    /// watcher, SIGHUP and a control call can ask at once; two applying together could leave the resolver with one
    /// file's settings and the relay with another's).
    private let serial: Locked<[UInt8]?>

    /// The last reload, whatever asked for it.
    var lastReload: ReloadRecord? { last.withLock { $0 } }

    init(
        path: String?, initial: Settings, serve: ServeSettings, resolver: HostResolver,
        service: HTTPDNSService, forwarder: ReloadingCAresForwarder? = nil, logger: Logger
    ) {
        self.path = path
        self.resolver = resolver
        self.service = service
        self.forwarder = forwarder
        self.logger = logger
        self.applied = Locked(serve)
        self.serial = Locked(Self.contents(path))
        let reload = Locked<(@Sendable (Settings) -> Void)?>(nil)
        self.watcher = path.map { path in
            FileWatcher<Settings>(
                path: path, initial: initial, logger: logger,
                load: { path in try SettingsLoading.load(path).get() },
                onChange: { settings in reload.withLock { $0 }?(settings) })
        }
        reload.withLock {
            $0 = { [weak self] settings in
                guard let self else { return }
                serial.withLock { appliedBytes in
                    // Already applied (a control call or SIGHUP read this edit first): nothing to do again.
                    let bytes = Self.contents(path)
                    guard bytes == nil || bytes != appliedBytes else { return }
                    if apply(settings, trigger: "file").applied { appliedBytes = bytes }
                }
            }
        }
    }

    func start(interval: Int) {
        if interval > 0 { watcher?.start(interval: .milliseconds(interval)) }
        let task = Task { [weak self] in
            for await _ in await UnixSignalsSequence(trapping: .sighup) {
                guard let self else { return }
                _ = self.reloadNow(trigger: "signal")
            }
        }
        hangUp.withLock { $0 = task }
    }

    func stop() {
        watcher?.stop()
        hangUp.withLock { $0?.cancel() }
    }

    /// Reads the settings file (and the environment) again and applies it; what `trigger` asked for (`signal`,
    /// `control`) is recorded with the outcome.
    ///
    /// A file unchanged since it was last applied is not applied again (that would rebuild the upstreams and forget
    /// every negative answer, for nothing): the overrides and hosts files are checked now instead, and the record
    /// says `unchanged`.
    func reloadNow(trigger: String) -> ReloadRecord {
        serial.withLock { appliedBytes in
            let bytes = Self.contents(path)
            if let bytes, bytes == appliedBytes {
                resolver.checkLocalFilesNow()
                logger.notice(
                    "settings unchanged; overrides and hosts files checked", metadata: ["trigger": "\(trigger)"])
                let record = ReloadRecord(
                    time: Date().timeIntervalSince1970, trigger: trigger, applied: true, error: nil,
                    restartNeeded: false, unchanged: true)
                last.withLock { $0 = record }
                return record
            }
            do {
                let record = apply(try SettingsLoading.load(path).get(), trigger: trigger)
                if record.applied { appliedBytes = bytes }
                return record
            } catch {
                return record(trigger: trigger, error: error)
            }
        }
    }

    /// The bytes of the settings file at `path`, `nil` without one (or when it cannot be read).
    private static func contents(_ path: String?) -> [UInt8]? {
        path.flatMap { FileManager.default.contents(atPath: $0) }.map(Array.init)
    }

    /// Records a reload that failed with `error`: the last good settings stay.
    private func record(trigger: String, error: any Error) -> ReloadRecord {
        logger.error("settings not applied; the last good ones stay", metadata: ["error": "\(error)"])
        let record = ReloadRecord(
            time: Date().timeIntervalSince1970, trigger: trigger, applied: false, error: "\(error)",
            restartNeeded: false)
        last.withLock { $0 = record }
        return record
    }

    private func apply(_ edited: Settings, trigger: String) -> ReloadRecord {
        do {
            let after = try edited.read(ServeSettings.section)
            let settings = ServeCommand.served(edited.resolver, serve: after)
            try ServeCommand.checkAccounts(after)
            try resolver.apply(settings)
            try forwarder?.apply(settings.cares)
            service.apply(after.service)
            let before = applied.withLock { previous in
                defer { previous = after }
                return previous
            }
            let restartNeeded = before.server != after.server
            if restartNeeded {
                logger.warning(
                    "the listener's settings (serve.listen, serve.admin, the certificate, body, connection and queue limits, deadlines, client prefixes for connection limits) take effect at the next start"
                )
            }
            logger.notice("settings applied", metadata: ["trigger": "\(trigger)"])
            let record = ReloadRecord(
                time: Date().timeIntervalSince1970, trigger: trigger, applied: true, error: nil,
                restartNeeded: restartNeeded)
            last.withLock { $0 = record }
            return record
        } catch {
            return record(trigger: trigger, error: error)
        }
    }
}
