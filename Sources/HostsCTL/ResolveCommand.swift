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

    /// An HTTP DNS service to resolve through instead of c-ares.
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
    }

    /// Resolves every host concurrently and prints the results in the order given.
    public func run() async throws {
        let file = SettingsLoading.load(config)
        for diagnostic in file.diagnostics { printToStandardError(diagnostic.description) }
        guard let settings = file.settings, file.errors.isEmpty else {
            throw ValidationError("the settings have errors; see above (hostsctl config check)")
        }
        let overridesPath = hosts ?? (settings.sources.contains(.overrides) ? settings.overridesFile : nil)
        let overrides = try overridesPath.map(Self.loadOverrides)
        var layers: [any HostNameResolver] = []
        var transports: [HTTPDNSTransport] = []
        var caresResolver: CAresResolver?
        defer { caresResolver?.shutdown() }
        if httpDNS.isSelected {
            let (resolver, transport) = try httpDNS.makeResolver(timeout: Self.duration(timeout, default: 5))
            layers = [resolver]
            transports = [transport]
        } else {
            for source in settings.sources {
                switch source {
                case .overrides, .cache:
                    continue  // overrides wrap the chain below; the cache arrives with the host resolver
                case .httpdns:
                    let transport = try Self.usage {
                        try HTTPDNSTransport(
                            configuration: .init(
                                requestTimeout: Self.duration(timeout, default: Double(settings.httpTimeoutMilliseconds) / 1000),
                                additionalTrustRoots: settings.trustCA + httpDNS.trustCA
                            )
                        )
                    }
                    transports.append(transport)
                    for provider in settings.providers {
                        layers.append(try Self.usage {
                            try HTTPDNSResolver(configuration: try provider.resolverConfiguration(), transport: transport)
                        })
                    }
                case .cares:
                    let options = CAresResolver.Options(
                        servers: servers.isEmpty ? settings.caresServers : servers,
                        timeout: Self.duration(timeout, default: Double(settings.caresTimeoutMilliseconds) / 1000),
                        tries: tries ?? settings.caresTries,
                        useTCP: settings.caresTCP
                    )
                    let resolver = try Self.usage { try CAresResolver(options: options) }
                    caresResolver = resolver
                    layers.append(resolver)
                }
            }
        }
        let reports = await Self.resolveAll(
            names,
            family: family,
            with: OverridingResolver(overrides: overrides, upstream: LayeredResolver(layers: layers))
        )
        for transport in transports { await transport.shutdown() }
        if json {
            print(ResolveReport.json(reports))
        } else {
            print(ResolveReport.text(reports), terminator: "")
        }
        if reports.contains(where: { $0.error != nil }) {
            throw ExitCode(1)
        }
    }

    /// Seconds from the command line, or the default, as a duration.
    static func duration(_ seconds: Double?, default fallback: Double) -> Duration {
        .milliseconds(Int64(((seconds ?? fallback) * 1000).rounded(.up)))
    }

    /// Runs `body`, turning a ``DNSError`` into a usage error (exit 64).
    static func usage<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as DNSError { throw ValidationError(error.description) }
    }

    /// Resolves `hosts` concurrently, timing each, and returns the reports in input order.
    static func resolveAll(
        _ hosts: [String],
        family: AddressFamily,
        with resolver: some HostNameResolver
    ) async -> [ResolveReport] {
        await withTaskGroup(of: (Int, ResolveReport).self) { group in
            for (index, host) in hosts.enumerated() {
                group.addTask {
                    let clock = ContinuousClock()
                    let start = clock.now
                    let outcome: Result<Resolution, DNSError>
                    do {
                        outcome = .success(try await resolver.resolve(host, family: family))
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

    /// Loads an overrides file; bad lines are reported on standard error and skipped, an unreadable file is a
    /// usage error.
    static func loadOverrides(_ path: String) throws -> HostOverrides {
        let file: HostsFile
        do {
            file = try HostsFile(contentsOf: path)
        } catch {
            throw ValidationError(error.message)
        }
        for diagnostic in file.diagnostics {
            printToStandardError("\(diagnostic) (line skipped)")
        }
        return HostOverrides(file: file.table)
    }

    static func parseFamily(_ text: String) throws -> AddressFamily {
        guard let family = AddressFamily(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a family; use ipv4, ipv6 or any.")
        }
        return family
    }
}
