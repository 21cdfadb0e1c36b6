import Foundation
import HTTPDNSCore

/// How each upstream has fared lately, for an operator's status call (`hostsctl control status`): when it last
/// answered and last failed, and how many of its queries in a row failed. It is told where every upstream query is
/// counted in the metrics, with the same rule for an answer (any DNS answer, SERVFAIL and REFUSED included) and a
/// failure (a timeout, a transport error). At most ``maximumSources`` sources are followed: the configured
/// upstreams and the relay, never anything a client names.
package final class UpstreamHealth: Sendable {
    /// One upstream's record.
    package struct Record: Codable, Sendable, Hashable {
        /// The upstream's name, as in `httpdns_upstream_duration{source}`.
        package var source: String
        /// `up` (its last query answered), `failing` (its last one or two failed), `down` (three or more in a row
        /// failed) or `unknown` (never asked).
        package var state: String
        /// Queries it answered since the start.
        package var answered: Int
        /// Queries that failed since the start.
        package var failed: Int
        /// Queries in a row that failed, up to now.
        package var consecutiveFailures: Int
        /// When it last answered, seconds since 1970.
        package var lastAnswer: Double?
        /// When a query last failed, seconds since 1970.
        package var lastFailure: Double?
        /// How long its last answer took.
        package var lastAnswerMilliseconds: Double?
    }

    /// The most sources followed.
    static let maximumSources = 64
    /// Failures in a row that make an upstream `down`.
    static let downAfter = 3

    private let records = Locked<[String: Record]>([:])

    package init() {}

    /// Records one query of `source`: answered or failed, after `duration`.
    package func record(_ source: String, answered: Bool, duration: Duration) {
        let now = Date().timeIntervalSince1970
        records.withLock { records in
            guard records[source] != nil || records.count < Self.maximumSources else { return }
            var record =
                records[source]
                ?? Record(source: source, state: "unknown", answered: 0, failed: 0, consecutiveFailures: 0)
            if answered {
                record.answered += 1
                record.consecutiveFailures = 0
                record.lastAnswer = now
                record.lastAnswerMilliseconds = Double(duration.wholeNanoseconds) / 1e6
                record.state = "up"
            } else {
                record.failed += 1
                record.consecutiveFailures += 1
                record.lastFailure = now
                record.state = record.consecutiveFailures >= Self.downAfter ? "down" : "failing"
            }
            records[source] = record
        }
    }

    /// The records of the `known` sources (those configured now; one never asked is `unknown`), by name. Sources
    /// no longer known (a reload removed them) are forgotten, so the table follows the configuration.
    package func records(known: [String]) -> [Record] {
        let names = Set(known)
        var all = records.withLock { records in
            records = records.filter { names.contains($0.key) }
            return records
        }
        for source in names where all[source] == nil {
            all[source] = Record(source: source, state: "unknown", answered: 0, failed: 0, consecutiveFailures: 0)
        }
        return all.values.sorted { $0.source < $1.source }
    }
}
