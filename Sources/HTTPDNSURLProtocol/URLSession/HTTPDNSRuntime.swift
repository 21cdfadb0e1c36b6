#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
public import CoreMetrics
import Foundation
public import HTTPDNS
public import HTTPDNSSettings
public import Logging
import Synchronization
import HTTPDNSCore

/// The library, started with one call: the resolver and the interceptor built from a settings file, the URL
/// protocol registered for `URLSession.shared` and the default configurations, the settings file followed while
/// running, and one handle to change overrides and to shut everything down.
///
/// ```swift
/// let httpdns = try HTTPDNSRuntime.start(configurationFile: "Config/hostsctl.json")
/// // … URLSession.shared requests now go to the fastest IP of their host …
/// try httpdns.setOverride(["127.0.0.1"], for: "api.example.com")
/// await httpdns.shutdown()   // unregisters, closes connections, saves the cache
/// ```
///
/// Call it first thing at start-up: on this platform `URLSession.shared` copies the registered protocol classes
/// when it is first used, so a session that exists before the call is not intercepted (a warning is logged saying
/// so). The overrides layer always exists, so run-time overrides work without an overrides file.
///
/// Edits of the settings file (checked every `reload.intervalMs`) and ``reload()`` apply the new settings to the
/// running resolver and interceptor: sources and their order, c-ares servers, timeouts and search settings,
/// providers, cache TTL bounds, probing, the dual-stack policy, the interception scope, the connection race and
/// the proxy mode. An edit with errors changes nothing: the last good settings stay and the errors are logged with
/// their line and column.
public final class HTTPDNSRuntime: Sendable {
    /// The resolver requests are resolved through.
    public let resolver: HostResolver
    /// The interceptor behind the URL protocol.
    public let interceptor: HTTPDNSInterceptor
    /// The settings file followed, if any.
    let configurationFile: String?
    private let logger: Logger
    private let watcher: Locked<FileWatcher<Settings>?>
    private let stopped = Atomic<Bool>(false)

    private init(resolver: HostResolver, interceptor: HTTPDNSInterceptor, configurationFile: String?, logger: Logger) {
        self.resolver = resolver
        self.interceptor = interceptor
        self.configurationFile = configurationFile
        self.logger = logger
        self.watcher = Locked(nil)
    }

    /// Reads the settings file (with `HOSTSCTL_*` environment overrides), builds the pipeline and the interceptor,
    /// registers the URL protocol and follows the file for edits.
    /// - Parameters:
    ///   - configurationFile: The JSON settings file; `nil` for the defaults with environment overrides.
    ///   - logger: Where the library logs (nothing by default; the library never bootstraps logging).
    ///   - metricsFactory: Where metrics go; by default the process's `MetricsSystem`.
    /// - Throws: `HTTPDNSError` with positioned diagnostics for a settings file with errors;
    ///   `HTTPDNSError` or `HTTPDNSError` when the pipeline cannot be built.
    public static func start(
        configurationFile: String?,
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws -> HTTPDNSRuntime {
        let settings = try Self.load(configurationFile)
        let runtime = try start(
            settings: settings, logger: logger, metricsFactory: metricsFactory, file: configurationFile)
        return runtime
    }

    /// Builds the pipeline and the interceptor from `settings` (the resolver's configuration and the `interception`
    /// section) and registers the URL protocol; no file is followed (``apply(_:)`` changes the settings while
    /// running).
    public static func start(
        settings: Settings,
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws -> HTTPDNSRuntime {
        try start(settings: settings, logger: logger, metricsFactory: metricsFactory, file: nil)
    }

    /// Registers the URL protocol for a resolver and an interceptor configuration built in code.
    public static func start(
        resolver: HostResolver,
        configuration: HTTPDNSInterceptor.Configuration = .init(),
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws -> HTTPDNSRuntime {
        let interceptor = try HTTPDNSInterceptor(
            resolver: resolver, configuration: configuration, logger: logger, metricsFactory: metricsFactory)
        let runtime = HTTPDNSRuntime(
            resolver: resolver, interceptor: interceptor, configurationFile: nil, logger: logger)
        runtime.register()
        return runtime
    }

    private static func start(
        settings: Settings, logger: Logger, metricsFactory: (any MetricsFactory)?, file: String?
    ) throws -> HTTPDNSRuntime {
        let interception = try settings.read(HTTPDNSInterceptor.Configuration.section)
        let resolver = try HostResolver(
            configuration: settings.resolver, logger: logger, metricsFactory: metricsFactory)
        let interceptor: HTTPDNSInterceptor
        do {
            interceptor = try HTTPDNSInterceptor(
                resolver: resolver, configuration: interception, logger: logger,
                metricsFactory: metricsFactory)
        } catch {
            Task { await resolver.shutdown() }
            throw error
        }
        let runtime = HTTPDNSRuntime(
            resolver: resolver, interceptor: interceptor, configurationFile: file, logger: logger)
        if let file {
            runtime.follow(file, from: settings, interval: settings.resolver.files.reloadIntervalMilliseconds)
        }
        runtime.register()
        return runtime
    }

    private func register() {
        HTTPDNSURLProtocol.register(interceptor)
        // URLSession.shared copies the registered classes when it is first used: if it already existed, it does
        // not have the protocol. Asking for it now creates it with the protocol when it did not exist yet.
        let shared = URLSession.shared.configuration.protocolClasses ?? []
        if !shared.contains(where: { $0 == HTTPDNSURLProtocol.self }) {
            logger.warning(
                """
                URLSession.shared was created before HTTPDNSRuntime.start, so its requests are not intercepted; \
                call HTTPDNSRuntime.start before anything uses URLSession, or install the protocol into your \
                session's configuration with HTTPDNSURLProtocol.install(_:into:)
                """)
        }
    }

    private func follow(_ file: String, from initial: Settings, interval: Int) {
        let watcher = FileWatcher<Settings>(
            path: file,
            initial: initial,
            logger: logger,
            load: { path in try Self.load(path) },
            onChange: { [weak self] settings in self?.applyLogging(settings) }
        )
        if interval > 0 { watcher.start(interval: .milliseconds(interval)) }
        self.watcher.withLock { $0 = watcher }
    }

    private func applyLogging(_ settings: Settings) {
        do {
            try apply(settings)
        } catch {
            logger.error("settings not applied; the last good ones stay", metadata: ["error": "\(error)"])
        }
    }

    /// Applies `settings` to the running resolver (`HostResolver.apply(_:)`) and interceptor
    /// (the interceptor's `apply(_:)`, from the settings' `interception` section).
    /// - Throws: `HTTPDNSError` for a bad `interception` section, `HTTPDNSError` when the resolver cannot use
    ///   them; then nothing changed.
    public func apply(_ settings: Settings) throws {
        let interception = try settings.read(HTTPDNSInterceptor.Configuration.section)
        try resolver.apply(settings.resolver)
        interceptor.apply(interception)
    }

    /// Reads the settings file and the `HOSTSCTL_*` environment again now and applies them.
    /// - Throws: `HTTPDNSError` with positioned diagnostics, or `HTTPDNSError`; the last good settings stay.
    public func reload() throws {
        try apply(try Self.load(configurationFile))
    }

    /// The settings of `file` with its `interception` section checked too (`nil`: the defaults).
    private static func load(_ file: String?) throws(HTTPDNSError) -> Settings {
        try SettingsFile.load(path: file, sections: [HTTPDNSInterceptor.Configuration.section.erased]).get()
    }

    /// Gives `host` (a name or a `*.suffix` pattern) exactly these addresses, over every other layer, until
    /// ``removeOverride(_:)`` (NSEtcHosts-style).
    /// - Throws: `HTTPDNSError` for a bad pattern or address.
    public func setOverride(_ addresses: [String], for host: String) throws {
        let pattern = try HostPattern(host)
        var ips: [IPAddress] = []
        for text in addresses {
            guard let ip = IPAddress(text) else {
                throw HTTPDNSError(code: .invalidConfiguration, message: "'\(text)' is not an IP address", host: host)
            }
            ips.append(ip)
        }
        resolver.overrides?.set(ips, for: pattern)
    }

    /// Removes a run-time override set with ``setOverride(_:for:)``.
    /// - Throws: `HTTPDNSError` for a bad pattern.
    public func removeOverride(_ host: String) throws {
        resolver.overrides?.remove(try HostPattern(host))
    }

    /// Unregisters the protocol, stops following the settings file, closes every connection and shuts the resolver
    /// down (which saves the cache). Requests in flight finish or fail; later ones go to URLSession unchanged.
    public func shutdown() async {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if HTTPDNSURLProtocol.interceptor === interceptor { HTTPDNSURLProtocol.unregister() }
        watcher.withLock { $0?.stop() }
        await interceptor.shutdown()
        await resolver.shutdown()
    }
}
