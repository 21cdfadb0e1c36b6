import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSCore
import HTTPDNSServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `hostsctl top`: a running `hostsctl serve` in the terminal, refreshed like `top` (or `dnsdist -c`'s `top`): the
/// `/stats.json` of its admin listener, with rates taken from one reading to the next. Usable over SSH: plain text,
/// and with `--plain` no screen control at all.
struct TopCommand: AsyncParsableCommand {
    /// The command's name and help.
    static let configuration = CommandConfiguration(
        commandName: "top",
        abstract: "Watch a running hostsctl serve: queries, cache, answer times, upstreams and refusals, refreshed.",
        discussion: """
            Reads /stats.json from the server's admin listener (serve.admin.listen, 127.0.0.1:8054 by default) every \
            interval and shows totals and rates; the first screen has no rates yet.
            """)

    /// Where the server is: `--config`, `--admin`.
    @OptionGroup var target: AdminOptions

    /// Seconds between readings.
    @Option(help: "Seconds between readings.")
    var interval: Double = 1

    /// How many screens, then exit; by default until interrupted.
    @Option(help: "Screens to show, then exit (default: until interrupted).")
    var count: Int?

    /// A name whose steering to show: the server's order of its addresses and each reporting network's.
    @Option(help: "A name whose address order to show: the server's, and each client network's that reported.")
    var name: String?

    /// Print screens one after another instead of redrawing.
    @Flag(help: "Print each screen after the last instead of redrawing the terminal.")
    var plain = false

    /// Creates the command (used by the argument parser).
    init() {}

    /// Checks the options.
    func validate() throws {
        guard interval >= 0.1, interval <= 3600 else { throw ValidationError("--interval must be 0.1 to 3600 s") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let name, (try? HostName(name)) == nil {
            throw ValidationError("'\(HostName.printable(name))' is not a host name")
        }
    }

    /// Reads and shows until interrupted or `--count` screens.
    func run() async throws {
        let (url, address) = try target.url(
            "/stats.json", query: name.map { [URLQueryItem(name: "name", value: $0)] } ?? [])
        let session = AdminOptions.session(timeout: max(interval, 2))
        defer { session.finishTasksAndInvalidate() }
        var previous: ServiceStats?
        var shown = 0
        while count.map({ shown < $0 }) ?? true {
            let screen: String
            do {
                let stats = try await Self.read(url, session: session)
                screen = Self.render(stats, previous: previous, source: "\(address)", interval: interval)
                previous = stats
            } catch {
                let line = "hostsctl top: cannot read \(address): \(AdminOptions.reason(error))"
                // Never reached: one line and a failure, not a screen that looks like data. A server that answered
                // and then stops (a restart) is shown waiting for it.
                guard previous != nil else {
                    printToStandardError(line + "; is hostsctl serve running there? (--admin, serve.admin.listen)")
                    throw ExitCode(1)
                }
                screen = line + "\n"
            }
            print(plain ? screen : "\u{1B}[H\u{1B}[2J" + screen, terminator: plain ? "\n" : "")
            shown += 1
            if count.map({ shown >= $0 }) ?? false { break }
            try await Task.sleep(for: .milliseconds(Int(interval * 1000)))
        }
    }

    /// One reading.
    static func read(_ url: URL, session: URLSession) async throws -> ServiceStats {
        let (data, response) = try await session.data(from: url)
        guard let status = (response as? HTTPURLResponse)?.statusCode, status == 200 else {
            throw ValidationError("\(url) answered \((response as? HTTPURLResponse)?.statusCode ?? 0)")
        }
        return try JSONDecoder().decode(ServiceStats.self, from: data)
    }

    /// One screen: the headline numbers, then queries by transport, answers by endpoint and status and by DNS
    /// outcome, upstreams and what the limits turned away; rates from `previous` when there is one.
    static func render(_ stats: ServiceStats, previous: ServiceStats?, source: String, interval: Double) -> String {
        let seconds = previous.map { stats.time - $0.time } ?? 0
        func rate(_ now: Double, _ before: Double?) -> String {
            guard let before, seconds > 0 else { return "-" }
            return String(format: "%.1f", max(0, now - before) / seconds)
        }
        func number(_ value: Double) -> String { String(format: "%.0f", value) }
        func milliseconds(_ value: Double?) -> String { value.map { String(format: "%.2f ms", $0) } ?? "-" }
        let total = stats.queries.values.reduce(0, +)
        let totalBefore = previous.map { $0.queries.values.reduce(0, +) }
        let time = Date(timeIntervalSince1970: stats.time).formatted(date: .omitted, time: .standard)
        var out = "hostsctl serve at \(source), \(time), every \(String(format: "%g", interval)) s\n"
        let hitRatio = stats.cache.hitRatio.map { String(format: "%.1f %%", $0 * 100) } ?? "-"
        out += "queries/s \(rate(total, totalBefore))  cache hits \(hitRatio)"
        out +=
            "  p50 \(milliseconds(stats.latency.p50Milliseconds))  p99 \(milliseconds(stats.latency.p99Milliseconds))"
        out += "  connections \(number(stats.connectionsOpen))  waiting \(number(stats.upstreamInFlight))\n\n"
        /// A table of totals by name with their rates: queries by transport, answers by DNS outcome.
        func totals(_ header: [String], _ now: [String: Double], _ before: [String: Double]?) -> String {
            TextTable.render(
                header: header,
                rows: now.keys.sorted().map { name in
                    [name, rate(now[name] ?? 0, before.map { $0[name] ?? 0 }), number(now[name] ?? 0)]
                }, indent: 0, rightAligned: [1, 2])
        }
        out += totals(["TRANSPORT", "Q/S", "TOTAL"], stats.queries, previous?.queries)
        let earlier = Dictionary(
            (previous?.answers ?? []).map { ("\($0.endpoint) \($0.status)", $0.count) }, uniquingKeysWith: +)
        out += "\n"
        out += TextTable.render(
            header: ["ENDPOINT", "STATUS", "/S", "TOTAL"],
            rows: stats.answers.map { answer in
                [
                    answer.endpoint, answer.status,
                    rate(answer.count, previous == nil ? nil : earlier["\(answer.endpoint) \(answer.status)"] ?? 0),
                    number(answer.count),
                ]
            }, indent: 0, rightAligned: [2, 3])
        out += "\n"
        out += totals(["RCODE", "/S", "TOTAL"], stats.outcomes ?? [:], previous.map { $0.outcomes ?? [:] })
        out += "\n"
        out += TextTable.render(
            header: ["UPSTREAM", "ANSWERED", "FAILED", "MEAN"],
            rows: stats.upstreams.map {
                [$0.source, number($0.answered), number($0.failed), milliseconds($0.meanMilliseconds)]
            }, indent: 0, rightAligned: [1, 2, 3])
        out += "\n"
        out += totals(
            ["TURNED AWAY", "/S", "TOTAL"], Self.totals(stats.refusals), previous.map { Self.totals($0.refusals) })
        if !stats.busiestNames.isEmpty {
            out += "\n"
            out += TextTable.render(
                header: ["BUSIEST NAME", "SHARE", "REQUESTS"],
                rows: stats.busiestNames.map {
                    [$0.name, String(format: "%.1f %%", $0.share * 100), String(format: "%.0f", $0.requests)]
                }, indent: 0, rightAligned: [1, 2])
        }
        if let steering = stats.steering {
            out += "\n\(HostName.printable(steering.host)): "
            out += steering.addresses.isEmpty ? "not in the cache\n" : "the server's order\n"
            out += TextTable.render(
                header: ["ADDRESS", "RANK", "SCORE", "CONNECT"],
                rows: steering.addresses.map {
                    [$0.ip, "\($0.rank)", String(format: "%.1f", $0.score), milliseconds($0.latencyMilliseconds)]
                }, indent: 0, rightAligned: [1, 2, 3])
            if !steering.networks.isEmpty {
                out += "\n"
                out += TextTable.render(
                    header: ["NETWORK", "ORDER"],
                    rows: steering.networks.map { [$0.network, $0.order.joined(separator: ", ")] }, indent: 0)
            }
        }
        return out
    }

    /// What the limits turned away, by name.
    static func totals(_ refusals: ServiceStats.Refusals) -> [String: Double] {
        [
            "rate limited": refusals.rateLimited, "connections refused": refusals.connectionsRefused,
            "upstream queue full": refusals.upstreamRefused, "UDP dropped": refusals.udpDropped,
        ]
    }
}
