public import ArgumentParser
import Foundation
public import HTTPDNS

/// `hostsctl resolve HOST...`: resolves host names and prints their addresses with TTL and source.
public struct ResolveCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    public static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve host names to IP addresses.",
        discussion: """
            Exit status: 0 when every host resolved, 1 when any failed, 64 for bad arguments.
            IP literals are printed as they are; localhost answers 127.0.0.1 and ::1 without a query.
            """
    )

    /// The names to resolve.
    @Argument(help: "Host names (or IP literals) to resolve.")
    public var names: [String] = []

    /// The DNS servers; the system's when none is given.
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp("DNS server as IP[:PORT] or [IPv6]:PORT; repeatable. Default: /etc/resolv.conf.", valueName: "IP[:PORT]"),
        transform: { try ServerAddress(parsing: $0) }
    )
    public var servers: [ServerAddress] = []

    /// Which address family to ask for.
    @Option(help: "Address family: ipv4, ipv6 or any.", transform: ResolveCommand.parseFamily)
    public var family: AddressFamily = .any

    /// Seconds to wait for each try.
    @Option(
        help: """
            Seconds to wait for an answer on the first try (c-ares doubles it on each later round);             with HTTP DNS, the time one HTTP exchange may take.
            """
    )
    public var timeout: Double?

    /// How many tries per query.
    @Option(help: "How many times each query is sent before it times out (default 2).")
    public var tries: Int?

    /// The settings file.
    @Option(help: ArgumentHelp("Settings file (JSON); default: $HOSTSCTL_CONFIG, else the built-in defaults.", valueName: "FILE"))
    public var config: String?

    /// An overrides file in hosts format; its names are answered from it with source `override`.
    @Option(help: ArgumentHelp("Overrides file in hosts format (IP name [name...]; *.suffix wildcards).", valueName: "FILE"))
    public var hosts: String?

    /// One layer to ask instead of the whole pipeline.
    @Option(
        name: .customLong("source"),
        help: ArgumentHelp("Ask only this layer: overrides, cache, httpdns or cares. Default: the whole pipeline.", valueName: "LAYER"),
        transform: ResolveCommand.parseSource
    )
    public var source: ResolverSettings.Source?

    /// The persisted cache file.
    @Option(
        name: .customLong("cache-file"),
        help: ArgumentHelp("The persisted IP cache. Default: cache.path, else $XDG_CACHE_HOME/hostsctl/cache.json.", valueName: "PATH")
    )
    public var cacheFile: String?

    /// Turn the cache off.
    @Flag(name: .customLong("no-cache"), help: "Do not read or write the IP cache.")
    public var noCache = false

    /// Probe the addresses before printing, so scores are measured.
    @Flag(help: "Probe each address with TCP connects (probe.ports) before printing, so scores are measured.")
    public var probe = false

    /// An HTTP DNS service to resolve through instead of the configured upstreams.
    @OptionGroup(title: "HTTP DNS")
    public var httpDNS: HTTPDNSOptions

    /// Print JSON instead of tables.
    @Flag(help: "Print a JSON array with one object per host.")
    public var json = false

    /// Creates the command (used by the argument parser).
    public init() {}

    /// Checks argument ranges before anything runs.
    public func validate() throws {
        guard !names.isEmpty else { throw ValidationError("Give at least one host name.") }
        if let timeout, !(timeout.isFinite && timeout >= 0.001 && timeout <= 3600) {
            throw ValidationError("--timeout must be between 0.001 and 3600 seconds.")
        }
        if let tries, !(1...16).contains(tries) { throw ValidationError("--tries must be between 1 and 16.") }
        if httpDNS.isSelected, !servers.isEmpty {
            throw ValidationError("--server is for c-ares; it cannot be combined with HTTP DNS options.")
        }
        if noCache, cacheFile != nil { throw ValidationError("--no-cache and --cache-file contradict each other.") }
        if noCache, source == .cache { throw ValidationError("--source cache needs the cache; drop --no-cache.") }
        if httpDNS.isSelected, let source, source != .httpdns {
            throw ValidationError("HTTP DNS options select the httpdns layer; they cannot be combined with --source \(source.rawValue).")
        }
        if !servers.isEmpty, let source, source != .cares {
            throw ValidationError("--server is for c-ares; it cannot be combined with --source \(source.rawValue).")
        }
    }

    /// Resolves every host concurrently through the pipeline and prints the results in the order given.
    public func run() async throws {
        let file = SettingsLoading.load(config)
        for diagnostic in file.diagnostics { printToStandardError(diagnostic.description) }
        guard let loaded = file.settings, file.errors.isEmpty else {
            throw ValidationError("the settings have errors; see above (hostsctl config check)")
        }
        let settings = try effectiveSettings(loaded)
        var upstreams: [HostResolver.Upstream]?
        var transport: HTTPDNSTransport?
        if httpDNS.isSelected {
            let (resolver, made) = try httpDNS.makeResolver(timeout: Self.duration(timeout, default: 5))
            upstreams = [HostResolver.Upstream(name: resolver.configuration.name, kind: .httpDNS, resolver: resolver)]
            transport = made
        }
        if let overridesPath = settings.overridesFile, settings.sources.contains(.overrides) {
            try Self.reportOverrideProblems(overridesPath)
        }
        let resolver = try Self.usage {
            try HostResolver(settings: settings, upstreams: upstreams, logger: CommandLogging.logger())
        }
        var reports = await Self.resolveAll(names, family: family, with: resolver)
        if probe {
            await resolver.waitForBackgroundWork()
            reports = reports.map { $0.withRankings(from: resolver.cache) }
        }
        await resolver.shutdown()
        await transport?.shutdown()
        if json {
            print(ResolveReport.json(reports))
        } else {
            print(ResolveReport.text(reports), terminator: "")
        }
        if reports.contains(where: { $0.error != nil }) {
            throw ExitCode(1)
        }
    }

    /// The settings with this command's options applied.
    func effectiveSettings(_ loaded: ResolverSettings) throws -> ResolverSettings {
        var settings = loaded
        if let hosts {
            settings.overridesFile = hosts
            if !settings.sources.contains(.overrides) { settings.sources.insert(.overrides, at: 0) }
        }
        if !servers.isEmpty { settings.caresServers = servers }
        if let timeout {
            settings.caresTimeoutMilliseconds = Int((timeout * 1000).rounded(.up))
            settings.httpTimeoutMilliseconds = Int((timeout * 1000).rounded(.up))
        }
        if let tries { settings.caresTries = tries }
        settings.trustCA += httpDNS.trustCA
        if noCache { settings.cacheEnabled = false }
        if let cacheFile { settings.cachePath = cacheFile }
        settings.reloadIntervalMilliseconds = 0
        settings.preResolve = []
        settings.probeEnabled = probe && settings.probeEnabled
        if probe { settings.probeIntervalSeconds = 1 }
        if let source {
            settings.sources = [source]
            if source == .cache { settings.cacheEnabled = true }
            if source == .httpdns, settings.providers.isEmpty, !httpDNS.isSelected {
                throw ValidationError("--source httpdns needs providers in the settings (httpdns.providers) or an HTTP DNS option.")
            }
        } else if httpDNS.isSelected, !settings.sources.contains(.httpdns) {
            settings.sources.append(.httpdns)
        }
        if httpDNS.isSelected {
            // The HTTP DNS options replace the configured upstreams.
            settings.sources.removeAll { $0 == .cares }
        }
        return settings
    }

    /// Seconds from the command line, or the default, as a duration.
    static func duration(_ seconds: Double?, default fallback: Double) -> Duration {
        .milliseconds(Int64(((seconds ?? fallback) * 1000).rounded(.up)))
    }

    /// Runs `body`, turning a ``DNSError`` into a usage error (exit 64).
    static func usage<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as DNSError { throw ValidationError(error.description) }
    }

    /// Resolves `hosts` concurrently through the pipeline, timing each, and returns the reports in input order.
    static func resolveAll(_ hosts: [String], family: AddressFamily, with resolver: HostResolver) async -> [ResolveReport] {
        await resolveAll(hosts) { host in try await resolver.resolveRanked(host, family: family) }
    }

    /// Resolves `hosts` concurrently through one plain resolver (no ranking), for tests and single layers.
    static func resolveAll(_ hosts: [String], family: AddressFamily, with resolver: some HostNameResolver) async -> [ResolveReport] {
        await resolveAll(hosts) { host in
            RankedResolution(unscored: try await resolver.resolve(host, family: family), family: family, freshness: .upstream)
        }
    }

    static func resolveAll(
        _ hosts: [String],
        resolve: @escaping @Sendable (String) async throws -> RankedResolution
    ) async -> [ResolveReport] {
        await withTaskGroup(of: (Int, ResolveReport).self) { group in
            for (index, host) in hosts.enumerated() {
                group.addTask {
                    let clock = ContinuousClock()
                    let start = clock.now
                    let outcome: Result<RankedResolution, DNSError>
                    do {
                        outcome = .success(try await resolve(host))
                    } catch let error as DNSError {
                        outcome = .failure(error)
                    } catch {
                        outcome = .failure(DNSError(code: .cancelled, message: "\(error)", host: host))
                    }
                    return (index, ResolveReport(host: host, outcome: outcome, elapsed: clock.now - start))
                }
            }
            var reports = [ResolveReport?](repeating: nil, count: hosts.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    /// Reports the bad lines of an overrides file on standard error (they are skipped); an unreadable file is a
    /// usage error.
    static func reportOverrideProblems(_ path: String) throws {
        let file: HostsFile
        do {
            file = try HostsFile(contentsOf: path)
        } catch {
            throw ValidationError(error.message)
        }
        for diagnostic in file.diagnostics {
            printToStandardError("\(diagnostic) (line skipped)")
        }
    }

    static func parseSource(_ text: String) throws -> ResolverSettings.Source {
        guard let source = ResolverSettings.Source(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a layer; use overrides, cache, httpdns or cares.")
        }
        return source
    }

    static func parseFamily(_ text: String) throws -> AddressFamily {
        guard let family = AddressFamily(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a family; use ipv4, ipv6 or any.")
        }
        return family
    }
}
