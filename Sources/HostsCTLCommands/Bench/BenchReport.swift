import Foundation
import HTTPDNS

/// The results of one `hostsctl bench` run and what was asked for, printable as a table, JSON or an HTML page.
struct BenchReport: Sendable {
    /// What the run measured, for the report's header.
    struct Setup: Sendable {
        var hosts: [String]
        var family: String
        var concurrency: Int
        /// `500 ms`-like text of the warm-up (`0.5 s`, `50 queries`), empty for none.
        var warmup: String
        /// `20000 queries` or `10 s` per source.
        var length: String
        var date: Date
    }

    var setup: Setup
    var results: [BenchResult]

    /// `{"sources": [{"source", "queries", "ok", "errors", "qps", "p50Ms", "p90Ms", "p99Ms", "maxMs", "elapsedMs",
    /// "setupMs"}]}`; latencies are `null` for a source with no successful query. `qps` is over `elapsedMs`, the
    /// window from the first measured query to the last answer; `setupMs` (making the source, the warm-up) is not
    /// in it.
    func json() -> JSONValue {
        .object([("sources", .array(results.map(Self.json)))])
    }

    private static func json(_ result: BenchResult) -> JSONValue {
        func ms(_ value: Double?) -> JSONValue { value.map { .number(($0 * 1000).rounded() / 1000) } ?? .null }
        return .object([
            ("source", .string(result.source)),
            ("queries", .number(Double(result.queries))),
            ("ok", .number(Double(result.ok))),
            ("errors", .object(result.sortedErrors.map { ($0.code, .number(Double($0.count))) })),
            ("qps", .number((result.queriesPerSecond * 10).rounded() / 10)),
            ("p50Ms", ms(result.percentile(0.5))),
            ("p90Ms", ms(result.percentile(0.9))),
            ("p99Ms", ms(result.percentile(0.99))),
            ("maxMs", ms(result.maximum)),
            ("elapsedMs", ms(result.elapsed.fractionalMilliseconds)),
            ("setupMs", ms(result.setup.fractionalMilliseconds)),
        ])
    }

    /// An aligned table, one row per source, then the errors of the sources that had any.
    func text() -> String {
        let header = ["SOURCE", "QUERIES", "OK", "QUERIES/S", "P50 MS", "P90 MS", "P99 MS", "MAX MS", "SET-UP MS"]
        let rows = results.map { result in
            [
                result.source,
                String(result.queries),
                Self.percent(result.successRate),
                String(Int(result.queriesPerSecond.rounded())),
                Self.milliseconds(result.percentile(0.5)),
                Self.milliseconds(result.percentile(0.9)),
                Self.milliseconds(result.percentile(0.99)),
                Self.milliseconds(result.maximum),
                Self.milliseconds(result.setup.fractionalMilliseconds),
            ]
        }
        var out = TextTable.render(header: header, rows: rows, indent: 0, rightAligned: Set(1..<header.count))
        for result in results where !result.errors.isEmpty {
            out +=
                "errors (\(result.source)): "
                + result.sortedErrors.map { "\($0.code) \($0.count)" }.joined(separator: ", ") + "\n"
        }
        return out
    }

    static func percent(_ fraction: Double) -> String {
        String(format: "%.1f%%", fraction * 100)
    }

    static func milliseconds(_ value: Double?) -> String {
        guard let value else { return "-" }
        return value < 10 ? String(format: "%.3f", value) : String(format: "%.1f", value)
    }
}

extension BenchResult {
    /// The errors, most frequent first (then by code), for stable output.
    var sortedErrors: [(code: String, count: Int)] {
        errors.map { (code: $0.key, count: $0.value) }.sorted {
            $0.count != $1.count ? $0.count > $1.count : $0.code < $1.code
        }
    }
}
