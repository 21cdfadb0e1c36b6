import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSCAres
import HTTPDNSCore

/// `hostsctl resolve HOST...`: resolves host names and prints their addresses with TTL and source.
struct ResolveCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve host names to IP addresses.",
        discussion: """
            Exit status: 0 when every host resolved, 1 when any failed (with --type or -x: when any has no record \
            of the type, NXDOMAIN and SERVFAIL included), 64 for bad arguments.
            IP literals are printed as they are; localhost answers 127.0.0.1 and ::1 without a query.
            With --type, records are shown as dig shows them: A and AAAA from the pipeline (with the CNAME chain \
            when c-ares answered), every other type (TXT, MX, SRV, CAA, HTTPS, PTR, ...) from c-ares's servers \
            (--server, else cares.servers, else /etc/resolv.conf) as hostsctl serve relays them; overrides and \
            HTTP DNS answer A and AAAA only. -x ADDRESS asks for its PTR record.
            """
    )

    /// The names to resolve.
    @Argument(help: "Host names (or IP literals) to resolve.")
    var names: [String] = []

    /// The record type to ask for, as a number.
    @Option(
        name: [.customShort("t"), .customLong("type")],
        help: ArgumentHelp(
            "Show records of this type: A, AAAA, TXT, MX, SRV, CAA, HTTPS, SVCB, PTR, NS, SOA, TYPEnnn, ...",
            valueName: "TYPE"),
        transform: ResolveCommand.parseType)
    var type: UInt16?

    /// Addresses to reverse-resolve.
    @Option(
        name: .customShort("x"),
        help: ArgumentHelp(
            "Reverse-resolve ADDRESS: its PTR record (may repeat; not with host names).", valueName: "ADDRESS"))
    var reverse: [String] = []

    /// Only the data, one a line.
    @Flag(
        help:
            "Print only the data, one a line: the addresses, best first; with --type or -x each answer record's, CNAME targets included (dig +short). A failed name prints nothing."
    )
    var short = false

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
        guard !names.isEmpty || !reverse.isEmpty else { throw ValidationError("Give at least one host name.") }
        try validateRecords()
        if cache.noCache, source == .cache { throw ValidationError("--source cache needs the cache; drop --no-cache.") }
        if resolution.httpDNS.isSelected, let source, source != .httpdns {
            throw ValidationError(
                "HTTP DNS options select the httpdns layer; they cannot be combined with --source \(source.rawValue).")
        }
        if !resolution.servers.isEmpty, let source, source != .cares {
            throw ValidationError("--server is for c-ares; it cannot be combined with --source \(source.rawValue).")
        }
    }

    /// Checks the record options: `-x` asks for PTR only, other types cannot be combined with what only the
    /// pipeline does (another layer than c-ares, HTTP DNS, probing), and `--type A` agrees with `--family`.
    private func validateRecords() throws {
        if short, json { throw ValidationError("--short and --json cannot be combined.") }
        if !reverse.isEmpty {
            if let type, type != 12 { throw ValidationError("-x asks for PTR records; drop --type.") }
            if !names.isEmpty { throw ValidationError("Give host names or -x addresses, not both.") }
            for address in reverse where IPAddress(address) == nil {
                throw ValidationError("-x takes an IP address, not '\(HostName.printable(address))'.")
            }
        }
        guard let type = recordType else { return }
        if type == 1 || type == 28 {
            if let family = resolution.family, family != (type == 1 ? .ipv4 : .ipv6) {
                throw ValidationError(
                    "--type \(DNSRecordText.typeName(type)) asks for \(type == 1 ? "ipv4" : "ipv6"); drop --family.")
            }
            return
        }
        let name = DNSRecordText.typeName(type)
        if let source, source != .cares {
            throw ValidationError("\(name) records come from c-ares; --source \(source.rawValue) cannot answer them.")
        }
        if resolution.httpDNS.isSelected {
            throw ValidationError("\(name) records come from c-ares (cares.servers or --server), not HTTP DNS.")
        }
        if probe { throw ValidationError("--probe measures addresses; \(name) records have none.") }
    }

    /// The record type the command shows records of: `--type`, or PTR for `-x`; `nil` for the ranked table.
    var recordType: UInt16? { reverse.isEmpty ? type : 12 }

    /// The address family asked for: `--type A` or `AAAA`, else `any` unless `--family` says otherwise.
    var family: AddressFamily {
        switch type {
        case 1: .ipv4
        case 28: .ipv6
        default: resolution.family ?? .any
        }
    }

    /// Resolves every host concurrently through the pipeline and prints the results in the order given.
    func run() async throws {
        var settings = try effectiveSettings(try resolution.loadSettings())
        if let recordType, recordType != 1, recordType != 28 {
            return try await runRelayed(recordType, settings: settings)
        }
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
        if let recordType {
            let chains = try await Self.chains(reports, type: recordType, settings: settings)
            await resolver.shutdown()
            await transport?.shutdown()
            let records = reports.map { report in
                RecordLookup.records(report, type: recordType, chain: chains[report.host])
            }
            try Self.show(records, json: json, short: short)
            return
        }
        await resolver.shutdown()
        await transport?.shutdown()
        if short {
            print(reports.flatMap { $0.addresses.map { "\($0.ip)\n" } }.joined(), terminator: "")
        } else if json {
            print(ResolveReport.json(reports))
        } else {
            print(ResolveReport.text(reports), terminator: "")
        }
        if reports.contains(where: { $0.error != nil }) {
            throw ExitCode(1)
        }
    }

    /// Asks c-ares's servers for `recordType` records of every name (or, for `-x`, of every address's reverse name)
    /// and prints them.
    private func runRelayed(_ recordType: UInt16, settings: HostResolver.Configuration) async throws {
        var asked = names.map { (asked: $0, name: $0) }
        asked += reverse.compactMap { text in IPAddress(text).map { (asked: text, name: DNSRecordText.reverseName($0)) }
        }
        let exchange = try Self.usage {
            try CAresResolver(configuration: settings.cares, logger: CommandLogging.logger())
        }
        let reports = await RecordLookup.lookUp(asked, type: recordType, through: exchange)
        exchange.shutdown()
        try Self.show(reports, json: json, short: short)
    }

    /// The CNAME chains c-ares's servers give for the names whose pipeline answer came from c-ares, by name.
    private static func chains(_ reports: [ResolveReport], type: UInt16, settings: HostResolver.Configuration)
        async throws -> [String: DNSRecordText.Answer]
    {
        let fromCAres = reports.filter { $0.resolution?.origin == .cares }.map(\.host)
        guard !fromCAres.isEmpty else { return [:] }
        let exchange = try usage { try CAresResolver(configuration: settings.cares, logger: CommandLogging.logger()) }
        defer { exchange.shutdown() }
        var chains: [String: DNSRecordText.Answer] = [:]
        for report in await RecordLookup.lookUp(fromCAres.map { ($0, $0) }, type: type, through: exchange) {
            if case .success(let answer) = report.outcome { chains[report.asked] = answer }
        }
        return chains
    }

    /// Prints record reports as text, JSON or `--short`, and fails (exit 1) when any name has no records of the type.
    private static func show(_ reports: [RecordReport], json: Bool, short: Bool) throws {
        if short {
            print(RecordReport.short(reports), terminator: "")
        } else if json {
            print(RecordReport.json(reports))
        } else {
            print(RecordReport.text(reports), terminator: "")
        }
        if reports.contains(where: { !$0.succeeded }) { throw ExitCode(1) }
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

    static func parseType(_ text: String) throws -> UInt16 {
        guard let code = DNSRecordText.typeCode(text), code != 0, code != 41 else {
            throw ValidationError("'\(text)' is not a record type; use A, AAAA, TXT, MX, HTTPS, PTR, TYPEnnn, ...")
        }
        return code
    }

    static func parseSource(_ text: String) throws -> HostResolver.Configuration.Source {
        guard let source = HostResolver.Configuration.Source(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a layer; use overrides, hosts, cache, httpdns, cares or system.")
        }
        return source
    }
}
