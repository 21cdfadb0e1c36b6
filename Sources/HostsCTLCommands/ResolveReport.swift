import Foundation
import HTTPDNS

/// The outcome of resolving one host on the command line, printable as text or JSON.
struct ResolveReport: Sendable {
    var host: String
    var outcome: Result<RankedResolution, HTTPDNSError>
    var elapsed: Duration

    /// The answer, when there is one.
    var resolution: RankedResolution? { try? outcome.get() }

    /// The ranked addresses (empty on failure).
    var addresses: [RankedAddress] { resolution?.addresses ?? [] }

    var error: HTTPDNSError? {
        if case .failure(let error) = outcome { return error }
        return nil
    }

    var elapsedMilliseconds: Double { elapsed.fractionalMilliseconds }

    /// The report with its addresses re-ranked from the cache (after probes measured them); order and scores
    /// change, the rest stays.
    func withRankings(from cache: HostCache?) -> ResolveReport {
        guard let cache, var resolution, let name = try? HostName(resolution.host) else { return self }
        let ranked = cache.rankedAddresses(for: name, family: resolution.family)
        guard Set(ranked.map(\.ip)) == Set(resolution.addresses.map(\.ip)) else { return self }
        resolution.addresses = ranked
        var copy = self
        copy.outcome = .success(resolution)
        return copy
    }

    /// The JSON array described in the README.
    static func json(_ reports: [ResolveReport]) -> String {
        JSONValue.array(reports.map(\.jsonValue)).serialized()
    }

    var jsonValue: JSONValue {
        let resolution = self.resolution
        // A TTL that never runs out (literals, localhost) is null, not 68 years.
        let permanent = resolution.map(Self.isPermanent) ?? false
        let ttl: JSONValue = permanent ? .null : .number(Double(resolution?.ttl ?? 0))
        let clampedFrom: JSONValue = resolution?.clampedFrom.map { .number(Double($0)) } ?? .null
        func milliseconds(_ value: Double) -> JSONValue { .number((value * 1000).rounded() / 1000) }
        let addresses = self.addresses.map { address -> JSONValue in
            // The score ranks by (the smoothed connect time plus the failure penalty); null before any
            // measurement, whose stand-in value means nothing to a reader.
            let score: JSONValue = address.isMeasured ? milliseconds(address.score) : .null
            let latency: JSONValue = address.latencyMilliseconds.map(milliseconds) ?? .null
            return .object([
                ("ip", .string(address.ip.description)),
                ("family", .string(address.ip.family.rawValue)),
                ("ttl", ttl),
                ("permanent", .bool(permanent)),
                ("ttlFromUpstream", clampedFrom),
                ("source", .string(resolution?.source.name ?? "")),
                ("origin", .string(resolution?.origin.name ?? "")),
                ("upstream", resolution?.upstream.map { .string($0) } ?? .null),
                ("stale", .bool(resolution?.isStale ?? false)),
                ("rank", .number(Double(address.rank))),
                ("score", score),
                ("latencyMs", latency),
                ("penaltyMs", milliseconds(address.penaltyMilliseconds)),
                ("successes", .number(Double(address.successes))),
                ("failures", .number(Double(address.failures))),
                ("synthesizedFrom", address.synthesizedFrom.map { .string($0.description) } ?? .null),
            ])
        }
        let error: JSONValue =
            self.error.map {
                .object([("code", .string($0.code.description)), ("message", .string($0.message))])
            } ?? .null
        return .object([
            ("host", .string(host)),
            ("addresses", .array(addresses)),
            ("freshness", resolution.map { .string($0.freshness.rawValue) } ?? .null),
            ("elapsedMs", .number((elapsedMilliseconds * 1000).rounded() / 1000)),
            ("error", error),
        ])
    }

    /// What the SOURCE column shows: the origin, or `cache (origin from UPSTREAM)` / `stale (…)`, naming the upstream
    /// the cached answer came from when it is known.
    static func sourceLabel(_ resolution: RankedResolution) -> String {
        let from = resolution.upstream.map { $0 == resolution.origin.name ? "" : " from \($0)" } ?? ""
        switch resolution.freshness {
        case .cache: return "cache (\(resolution.origin)\(from))"
        case .stale: return "stale (\(resolution.origin)\(from), \(resolution.staleSeconds)s past TTL)"
        default: return resolution.origin.name
        }
    }

    /// What the SCORE column shows, as what it is: the smoothed connect time measured (`12.3 ms`), and connects
    /// that failed (`failed 2 of 5`); `-` when never measured. The failure penalty the ranking adds is in the JSON
    /// (`penaltyMs`, `score`), not here: `50249.1` reads as a time, which it is not.
    static func scoreLabel(_ address: RankedAddress) -> String {
        guard address.isMeasured else { return "-" }
        var parts: [String] = []
        if let latency = address.latencyMilliseconds { parts.append(String(format: "%.1f ms", latency)) }
        if address.failures > 0 {
            parts.append("failed \(address.failures) of \(address.failures + address.successes)")
        }
        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }

    /// Whether the answer never expires: literals and `localhost`, whose TTL is the largest there is.
    static func isPermanent(_ resolution: RankedResolution) -> Bool { resolution.ttl >= ResolvedAddress.maximumTTL }

    /// What the TTL column shows: seconds, `permanent` for answers that never expire, and the upstream's own TTL
    /// when the cache's bounds changed it (`30 (clamped from 5)`).
    static func ttlLabel(_ resolution: RankedResolution) -> String {
        if isPermanent(resolution) { return "permanent" }
        guard let given = resolution.clampedFrom else { return "\(resolution.ttl)" }
        return "\(resolution.ttl) (clamped from \(given))"
    }

    /// One small table per host, then its time or error.
    static func text(_ reports: [ResolveReport]) -> String {
        var out = ""
        for report in reports {
            out += "\(report.host)\n"
            if let error = report.error {
                out += "  error \(error.code): \(error.message)\n"
            } else if let resolution = report.resolution {
                let source = sourceLabel(resolution)
                let rows = resolution.addresses.map {
                    [
                        "\($0.rank)", $0.ip.description,
                        $0.synthesizedFrom.map { "ipv6 (NAT64, synthesized from \($0))" } ?? $0.ip.family.rawValue,
                        ttlLabel(resolution), scoreLabel($0),
                        source,
                    ]
                }
                out += TextTable.render(
                    header: ["RANK", "ADDRESS", "FAMILY", "TTL", "SCORE", "SOURCE"], rows: rows, indent: 2)
            }
            out += "  time \(String(format: "%.2f", report.elapsedMilliseconds)) ms\n\n"
        }
        return out
    }
}

/// Plain-text columns, left-aligned unless named in `rightAligned` (for numbers), two spaces apart. Every cell is
/// shown as ``HostName/printable(_:)`` makes it: tables show names and text from servers and files, and a control
/// character among them must never reach the terminal as itself.
enum TextTable {
    static func render(header: [String], rows: [[String]], indent: Int, rightAligned: Set<Int> = []) -> String {
        let all = [header] + rows.map { $0.map(HostName.printable) }
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        let pad = String(repeating: " ", count: indent)
        return all.map { row in
            pad
                + row.enumerated().map { index, cell in
                    let fill = String(repeating: " ", count: widths[index] - cell.count)
                    if rightAligned.contains(index) { return fill + cell + (index == row.count - 1 ? "" : "  ") }
                    return index == row.count - 1 ? cell : cell + fill + "  "
                }.joined().trimmingTrailingSpaces()
        }.joined(separator: "\n") + "\n"
    }
}

extension String {
    /// The text without the spaces at its end.
    func trimmingTrailingSpaces() -> String {
        var text = Substring(self)
        while text.last == " " { text.removeLast() }
        return String(text)
    }
}
