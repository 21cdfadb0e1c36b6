import ArgumentParser
import Foundation
import HTTPDNS

/// `hostsctl probe HOST...`: measures TCP connect times to every address of each host and shows how the cache
/// ranks them.
struct ProbeCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Measure TCP connect times to each address of each host, and its score and rank in the cache.",
        discussion: """
            Each address gets --samples connects, one after another (nothing is sent; each connection is closed at \
            once). The samples feed the scored IP cache like the library's own probes do, and the cache is saved, \
            so the next resolve or fetch prefers the fastest address. With --no-cache, addresses are ranked by \
            their median connect time alone.

            Exit status: 0 when every host has an address that accepted a connection, 1 otherwise, 64 for bad \
            arguments.
            """
    )

    /// The names to probe.
    @Argument(help: "Host names (or IP literals) to probe.")
    var names: [String] = []

    /// The TCP port.
    @Option(help: "TCP port to connect to (default: the first of probe.ports, 443).")
    var port: Int?

    /// Samples per address.
    @Option(help: "Connects per address.")
    var samples: Int = 5

    /// Connect timeout.
    @Option(
        name: .customLong("connect-timeout"),
        help: ArgumentHelp("Seconds one connect may take (default: probe.timeoutMs).", valueName: "SECONDS"))
    var connectTimeout: Double?

    /// How names are resolved.
    @OptionGroup
    var resolution: ResolutionOptions

    /// `--cache-file` and `--no-cache`.
    @OptionGroup
    var cache: CacheOptions

    /// Print JSON.
    @Flag(help: "Print a JSON array with one object per host.")
    var json = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// Checks ranges before anything runs.
    func validate() throws {
        guard !names.isEmpty else { throw ValidationError("Give at least one host name.") }
        if let port, !(1...65_535).contains(port) { throw ValidationError("--port must be between 1 and 65535.") }
        guard (1...1000).contains(samples) else { throw ValidationError("--samples must be between 1 and 1000.") }
        if let connectTimeout, !(connectTimeout.isFinite && connectTimeout >= 0.001 && connectTimeout <= 600) {
            throw ValidationError("--connect-timeout must be between 0.001 and 600 seconds.")
        }
    }

    /// Resolves the hosts, probes their addresses and prints the report.
    func run() async throws {
        var settings = try resolution.loadSettings()
        cache.apply(to: &settings)
        settings.probeEnabled = false
        try ResolutionOptions.checkOverrides(settings)
        let port = port ?? settings.probe.ports.first ?? 443
        let timeout =
            connectTimeout.map { Duration.milliseconds(Int64(($0 * 1000).rounded(.up))) }
            ?? settings.probe.timeout
        let (upstreams, transport) = try resolution.commandLineUpstreams(&settings)
        let resolver = try ResolveCommand.usage {
            try HostResolver(
                configuration: settings, upstreams: upstreams, prober: nil, logger: CommandLogging.logger())
        }
        resolution.restrictCache(of: resolver)
        let reports = await Self.probeAll(
            names, family: resolution.family ?? .any, port: port, samples: samples, timeout: timeout, with: resolver,
            prober: TCPConnectProber())
        await resolver.shutdown()
        await transport?.shutdown()
        if json {
            print(JSONValue.array(reports.map(\.jsonValue)).serialized())
        } else {
            print(reports.map(\.text).joined(separator: "\n"), terminator: "")
        }
        if reports.contains(where: { !$0.isReachable }) { throw ExitCode(1) }
    }

    /// Resolves and probes every host concurrently; the reports come back in the order of `hosts`.
    static func probeAll(
        _ hosts: [String],
        family: AddressFamily,
        port: Int,
        samples: Int,
        timeout: Duration,
        with resolver: HostResolver,
        prober: some ConnectProber
    ) async -> [ProbeReport] {
        await withTaskGroup(of: (Int, ProbeReport).self) { group in
            for (index, host) in hosts.enumerated() {
                group.addTask {
                    (
                        index,
                        await probe(
                            host, family: family, port: port, samples: samples, timeout: timeout, with: resolver,
                            prober: prober)
                    )
                }
            }
            var reports = [ProbeReport?](repeating: nil, count: hosts.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    private static func probe(
        _ host: String,
        family: AddressFamily,
        port: Int,
        samples: Int,
        timeout: Duration,
        with resolver: HostResolver,
        prober: some ConnectProber
    ) async -> ProbeReport {
        let resolution: RankedResolution
        do {
            resolution = try await resolver.resolveRanked(host, family: family)
        } catch {
            let dnsError = error as? HTTPDNSError ?? HTTPDNSError(code: .cancelled, message: "\(error)", host: host)
            return ProbeReport(host: host, port: port, source: nil, addresses: [], error: dnsError)
        }
        let name = try? HostName(resolution.host)
        // Addresses are probed in parallel; each one's samples one after another, so they do not compete.
        var addresses = await withTaskGroup(of: ProbeReport.Address.self) { group in
            for address in resolution.addresses {
                group.addTask {
                    var outcomes: [ProbeOutcome] = []
                    for _ in 0..<samples {
                        let outcome = await prober.probe(address.ip, port: port, timeout: timeout)
                        outcomes.append(outcome)
                        if let name {
                            switch outcome {
                            case .connected(let latency):
                                resolver.reportConnect(to: address.ip, of: name, latency: latency)
                            case .failed: resolver.reportFailure(to: address.ip, of: name)
                            }
                        }
                    }
                    return ProbeReport.Address(ip: address.ip, outcomes: outcomes)
                }
            }
            var all: [ProbeReport.Address] = []
            for await address in group { all.append(address) }
            return all
        }
        // Rank as the resolver does now that the samples are in the cache (override addresses included); else by
        // median connect time.
        let ranked =
            resolver.cache == nil ? [] : ((try? await resolver.resolveRanked(host, family: family))?.addresses ?? [])
        if !ranked.isEmpty, Set(ranked.map(\.ip)) == Set(addresses.map(\.ip)) {
            for (index, address) in addresses.enumerated() {
                let entry = ranked.first { $0.ip == address.ip }
                addresses[index].rank = entry?.rank
                addresses[index].score = entry?.score
                addresses[index].cached = entry
            }
            addresses.sort { ($0.rank ?? .max) < ($1.rank ?? .max) }
        } else {
            addresses.sort { ($0.median ?? .infinity, $0.ip) < ($1.median ?? .infinity, $1.ip) }
        }
        return ProbeReport(host: host, port: port, source: resolution.source.name, addresses: addresses, error: nil)
    }
}

/// What `hostsctl probe` found for one host.
struct ProbeReport: Sendable {
    /// One address and its connect samples.
    struct Address: Sendable {
        var ip: IPAddress
        var outcomes: [ProbeOutcome]
        /// The address's place in the cache's ranking (1 is the best); `nil` without a cache.
        var rank: Int?
        /// The cache's score in milliseconds (lower is better); `nil` without a cache.
        var score: Double?
        /// The address as the cache ranks it now (its smoothed connect time and failures); `nil` without a cache.
        var cached: RankedAddress?

        /// Connect times of the successful samples, in milliseconds, ascending.
        var connectTimes: [Double] {
            outcomes.compactMap { outcome -> Double? in
                if case .connected(let latency) = outcome { return latency.fractionalMilliseconds }
                return nil
            }.sorted()
        }

        var median: Double? {
            let times = connectTimes
            guard !times.isEmpty else { return nil }
            let middle = times.count / 2
            return times.count % 2 == 1 ? times[middle] : (times[middle - 1] + times[middle]) / 2
        }

        /// Failed samples by error code.
        var errors: [String: Int] {
            var errors: [String: Int] = [:]
            for case .failed(let code) in outcomes { errors[code.description, default: 0] += 1 }
            return errors
        }
    }

    var host: String
    var port: Int
    var source: String?
    var addresses: [Address]
    var error: HTTPDNSError?

    /// Whether some address accepted a connection.
    var isReachable: Bool { addresses.contains { !$0.connectTimes.isEmpty } }

    var jsonValue: JSONValue {
        func ms(_ value: Double?) -> JSONValue { value.map { .number(($0 * 1000).rounded() / 1000) } ?? .null }
        return .object([
            ("host", .string(host)),
            ("port", .number(Double(port))),
            ("source", source.map(JSONValue.string) ?? .null),
            (
                "addresses",
                .array(
                    addresses.map { address in
                        let times = address.connectTimes
                        return .object([
                            ("ip", .string(address.ip.description)),
                            ("samples", .number(Double(address.outcomes.count))),
                            ("ok", .number(Double(times.count))),
                            ("medianMs", ms(address.median)),
                            ("minMs", ms(times.first)),
                            ("maxMs", ms(times.last)),
                            (
                                "errors",
                                .object(
                                    address.errors.sorted { $0.key < $1.key }.map {
                                        ($0.key, .number(Double($0.value)))
                                    })
                            ),
                            ("score", ms(address.score)),
                            ("rank", address.rank.map { .number(Double($0)) } ?? .null),
                        ])
                    })
            ),
            (
                "error",
                error.map { .object([("code", .string($0.code.description)), ("message", .string($0.message))]) }
                    ?? .null
            ),
        ])
    }

    var text: String {
        var out = "\(host) port \(port)\(source.map { " (addresses from \($0))" } ?? "")\n"
        if let error {
            return out + "  error \(error.code): \(error.message)\n"
        }
        // The order is the cache's when there is one: by its smoothed connect time (all samples so far, this run's
        // among them) with failures penalized, which a median of this run alone can disagree with.
        let ranked = addresses.contains { $0.rank != nil }
        out +=
            ranked
            ? "  ranked as the cache ranks: smoothed connect time (CACHE), failures penalized; MEDIAN is this run's\n"
            : "  ranked by this run's median connect time (no cache)\n"
        let rows = addresses.map { address -> [String] in
            let times = address.connectTimes
            let failures = address.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
                separator: ", ")
            return [
                address.rank.map(String.init) ?? "-",
                address.ip.description,
                "\(times.count)/\(address.outcomes.count)",
                BenchReport.milliseconds(address.median),
                BenchReport.milliseconds(times.first),
                BenchReport.milliseconds(times.last),
                address.cached.map(ResolveReport.scoreLabel) ?? "-",
                failures.isEmpty ? "" : failures,
            ]
        }
        out += TextTable.render(
            header: ["RANK", "ADDRESS", "OK", "MEDIAN MS", "MIN MS", "MAX MS", "CACHE", "ERRORS"], rows: rows,
            indent: 2,
            rightAligned: [2, 3, 4, 5, 6])
        return out
    }
}
