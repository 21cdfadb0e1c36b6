import ArgumentParser
import Foundation
import HTTPDNS

/// `hostsctl resolve HOST...`: resolves host names and prints their addresses with TTL and source.
struct ResolveCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve host names to IP addresses.",
        discussion: """
            Exit status: 0 when every host resolved, 1 when any failed, 64 for bad arguments.
            IP literals are printed as they are; localhost answers 127.0.0.1 and ::1 without a query.
            """
    )

    /// The names to resolve.
    @Argument(help: "Host names (or IP literals) to resolve.")
    var names: [String] = []

    /// How names are resolved: servers, family (default `any`), timeouts, settings, overrides, HTTP DNS.
    @OptionGroup
    var resolution: ResolutionOptions

    /// One layer to ask instead of the whole pipeline.
    @Option(
        name: .customLong("source"),
        help: ArgumentHelp(
            "Ask only this layer: overrides, hosts, cache, httpdns, cares or system. Default: the whole pipeline.",
            valueName: "LAYER"),
        transform: ResolveCommand.parseSource
    )
    var source: HostResolver.Configuration.Source?

    /// `--cache-file` and `--no-cache`.
    @OptionGroup
    var cache: CacheOptions

    /// Probe the addresses before printing, so scores are measured.
    @Flag(help: "Probe each address with TCP connects (probe.ports) before printing, so scores are measured.")
    var probe = false

    /// Print JSON instead of tables.
    @Flag(help: "Print a JSON array with one object per host.")
    var json = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// Checks the combinations of options before anything runs.
    func validate() throws {
        guard !names.isEmpty else { throw ValidationError("Give at least one host name.") }
        if cache.noCache, source == .cache { throw ValidationError("--source cache needs the cache; drop --no-cache.") }
        if resolution.httpDNS.isSelected, let source, source != .httpdns {
            throw ValidationError(
                "HTTP DNS options select the httpdns layer; they cannot be combined with --source \(source.rawValue).")
        }
        if !resolution.servers.isEmpty, let source, source != .cares {
            throw ValidationError("--server is for c-ares; it cannot be combined with --source \(source.rawValue).")
        }
    }

    /// The address family asked for: `any` unless `--family` says otherwise.
    var family: AddressFamily { resolution.family ?? .any }

    /// Resolves every host concurrently through the pipeline and prints the results in the order given.
    func run() async throws {
        var settings = try effectiveSettings(try resolution.loadSettings())
        try ResolutionOptions.checkOverrides(settings)
        let (upstreams, transport) = try resolution.commandLineUpstreams(&settings)
        let resolver = try Self.usage {
            try HostResolver(configuration: settings, upstreams: upstreams, logger: CommandLogging.logger())
        }
        resolution.restrictCache(of: resolver)
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
    func effectiveSettings(_ loaded: HostResolver.Configuration) throws -> HostResolver.Configuration {
        var settings = loaded
        let httpDNS = resolution.httpDNS
        cache.apply(to: &settings)
        settings.probeEnabled = probe && settings.probeEnabled
        if probe { settings.probe.interval = .seconds(1) }
        if let source {
            settings.sources = [source]
            settings.systemFallback = false
            if source == .cache { settings.cacheEnabled = true }
            if source == .httpdns, settings.httpDNSProviders.isEmpty, !httpDNS.isSelected {
                throw ValidationError(
                    "--source httpdns needs providers in the settings (httpdns.providers) or an HTTP DNS option.")
            }
        }
        return settings
    }

    /// Runs `body`, turning an `HTTPDNSError` into a usage error (exit 64).
    static func usage<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as HTTPDNSError { throw ValidationError(error.description) }
    }

    /// Resolves `hosts` concurrently through the pipeline, timing each, and returns the reports in input order.
    static func resolveAll(_ hosts: [String], family: AddressFamily, with resolver: HostResolver) async
        -> [ResolveReport]
    {
        await resolveAll(hosts) { host in try await resolver.resolveRanked(host, family: family) }
    }

    /// Resolves `hosts` concurrently through one plain resolver (no ranking), for tests and single layers.
    static func resolveAll(_ hosts: [String], family: AddressFamily, with resolver: some HostNameResolver) async
        -> [ResolveReport]
    {
        await resolveAll(hosts) { host in
            RankedResolution(
                unscored: try await resolver.resolve(host, family: family), family: family, freshness: .upstream)
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
                    let outcome: Result<RankedResolution, HTTPDNSError>
                    do {
                        outcome = .success(try await resolve(host))
                    } catch let error as HTTPDNSError {
                        outcome = .failure(error)
                    } catch {
                        outcome = .failure(HTTPDNSError(code: .cancelled, message: "\(error)", host: host))
                    }
                    return (index, ResolveReport(host: host, outcome: outcome, elapsed: clock.now - start))
                }
            }
            var reports = [ResolveReport?](repeating: nil, count: hosts.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    static func parseSource(_ text: String) throws -> HostResolver.Configuration.Source {
        guard let source = HostResolver.Configuration.Source(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a layer; use overrides, hosts, cache, httpdns, cares or system.")
        }
        return source
    }
}
