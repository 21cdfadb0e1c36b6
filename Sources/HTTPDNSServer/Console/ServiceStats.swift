import Foundation

/// The operator's live picture of the service, `/stats.json` on the admin listener: what the dashboard page and
/// `hostsctl top` show.
///
/// It is made from the text `/metrics` serves (the same rendering, at most one a second), so the page, the terminal
/// view and Prometheus read one bookkeeping: ``metrics`` holds every sample as `/metrics` has it, and the other
/// fields sum them up (queries by transport, answers by endpoint and status, the cache's hit ratio, answer-time
/// percentiles from the histogram buckets, each upstream's answers, failures and mean time, what the limits turned
/// away). Counters are totals since the start; a reader takes rates from two readings and their ``time``.
package struct ServiceStats: Codable, Sendable, Hashable {
    /// One sample of a metric: its labels and value.
    struct Sample: Codable, Sendable, Hashable {
        /// The labels, e.g. `["transport": "udp"]`.
        var labels: [String: String]
        /// The value.
        var value: Double
    }

    /// Requests answered by one endpoint with one status.
    package struct Answers: Codable, Sendable, Hashable {
        /// `dns-query`, `resolve`, `alibaba`, `tencent`, …
        package var endpoint: String
        /// The HTTP status (DNS transports count as their HTTP equivalent).
        package var status: String
        /// How many since the start.
        package var count: Double
    }

    /// The caches' hits and misses since the start, over every lookup path: the shared cache, the answers kept by
    /// client network (EDNS Client Subnet) and the relayed answers kept.
    package struct Cache: Codable, Sendable, Hashable {
        /// Fresh answers from the shared cache, kept for the client's network, or kept encoded by a connection.
        var hits: Double
        /// Lookups no cache could answer: each one waited for an upstream.
        var misses: Double
        /// Expired answers served while a refresh ran.
        var staleServes: Double
        /// Cached NXDOMAIN or no-data answers.
        var negativeHits: Double
        /// Queries of other types answered from the relayed answers kept (`nil` from a server that does not count
        /// them).
        var relayKept: Double?
        /// Queries of other types sent upstream.
        var relayAsked: Double?
        /// Hits (fresh, stale, negative, kept by network, relayed and kept) over all lookups; `nil` before the
        /// first (shown as "–").
        package var hitRatio: Double?
    }

    /// The answers by what clients were told (`rcode`: NOERROR, NXDOMAIN, SERVFAIL, REFUSED, FORMERR, NOTIMP, OTHER
    /// for a relayed code beyond those, and WITHHELD, an answer the private-address guard withheld and sent as
    /// NXDOMAIN), whichever way they asked.
    /// `nil` from a server of an earlier release, which does not count them.
    package var outcomes: [String: Double]?

    /// Answer times, from the `httpdns_serve_request_duration_seconds` histogram of every answering endpoint.
    package struct Latency: Codable, Sendable, Hashable {
        /// Requests measured.
        var count: Double
        /// The median, milliseconds (linear within its bucket, as Prometheus's `histogram_quantile`).
        package var p50Milliseconds: Double?
        /// The 99th percentile, milliseconds.
        package var p99Milliseconds: Double?
    }

    /// One upstream's record since the start.
    package struct Upstream: Codable, Sendable, Hashable {
        /// Its name (`cares`, a provider's name).
        package var source: String
        /// Lookups it answered.
        package var answered: Double
        /// Lookups it failed.
        package var failed: Double
        /// The mean time of its answers, milliseconds; `nil` before the first.
        package var meanMilliseconds: Double?
    }

    /// What the limits turned away since the start.
    package struct Refusals: Codable, Sendable, Hashable {
        /// Requests over their network's rate (429, or REFUSED over DNS).
        package var rateLimited: Double
        /// Connections closed at once: over the per-network or a listener's limit.
        package var connectionsRefused: Double
        /// Lookups refused a place in the upstream queue (503, SERVFAIL).
        package var upstreamRefused: Double
        /// UDP queries dropped: the socket's queue was full.
        package var udpDropped: Double
    }

    /// How the service orders one name's addresses, for the operator who asks (`/stats.json?name=`).
    package struct Steering: Codable, Sendable, Hashable {
        /// One address as the server ranks it.
        package struct Address: Codable, Sendable, Hashable {
            /// The address.
            package var ip: String
            /// Its place, 1 for the best.
            package var rank: Int
            /// Its score (lower is better: the smoothed connect time with the failure penalty, milliseconds).
            package var score: Double
            /// The smoothed connect time measured by the server's probes, milliseconds.
            package var latencyMilliseconds: Double?
        }

        /// The order a client network's reports give.
        package struct NetworkOrder: Codable, Sendable, Hashable {
            /// The network (`198.51.100.0/24`, or a steering region).
            package var network: String
            /// Its addresses, best first.
            package var order: [String]
        }

        /// The name.
        package var host: String
        /// The server's own order, from its cache (empty when the name is not cached).
        package var addresses: [Address]
        /// The networks whose reports reorder the answer, each with its order.
        package var networks: [NetworkOrder]
    }

    /// When the reading was made, seconds since 1970.
    package var time: Double
    /// Queries by transport: `http`, `https`, `udp`, `tcp`, `tls`.
    package var queries: [String: Double]
    /// Answers by endpoint and status.
    package var answers: [Answers]
    /// The scored cache.
    package var cache: Cache
    /// Answer times.
    package var latency: Latency
    /// Each upstream, by name.
    package var upstreams: [Upstream]
    /// What the limits turned away.
    package var refusals: Refusals
    /// Connections open now.
    package var connectionsOpen: Double
    /// Lookups waiting for an upstream now.
    package var upstreamInFlight: Double
    /// Every sample `/metrics` served, by metric name.
    var metrics: [String: [Sample]]
    /// The steering of the name asked for, if one was.
    package var steering: Steering?
    /// The names asked for most, most first (sampled: see `BusyNames`; not a metric, so not in ``metrics``).
    package var busiestNames: [BusyName] = []

    /// A name clients ask for often.
    package struct BusyName: Codable, Sendable, Hashable {
        /// The name.
        package var name: String
        /// The requests for it since the start, estimated from a sample.
        package var requests: Double
        /// Its share of all requests.
        package var share: Double
    }

    /// The picture the exposition text `text` gives at `time`.
    init(exposition text: String, time: Double) {
        let metrics = Self.parse(text)
        self.time = time
        self.metrics = metrics
        func total(_ name: String, where match: [String: String] = [:]) -> Double {
            (metrics[name] ?? []).filter { sample in match.allSatisfy { sample.labels[$0.key] == $0.value } }
                .reduce(0) { $0 + $1.value }
        }
        queries = Dictionary(
            (metrics["httpdns_serve_queries_total"] ?? []).map { ($0.labels["transport"] ?? "", $0.value) },
            uniquingKeysWith: +)
        answers = (metrics["httpdns_serve_requests_total"] ?? []).map {
            Answers(endpoint: $0.labels["endpoint"] ?? "", status: $0.labels["status"] ?? "", count: $0.value)
        }.sorted { ($0.endpoint, $0.status) < ($1.endpoint, $1.status) }
        outcomes = Dictionary(
            (metrics["httpdns_serve_answers_total"] ?? []).map { ($0.labels["rcode"] ?? "", $0.value) },
            uniquingKeysWith: +)
        // A lookup for a client network that went upstream is counted in httpdns_cache_misses by the resolver; one
        // answered from the answers kept by network is a hit of the service's own.
        let hits =
            total("httpdns_cache_hits") + total("httpdns_serve_client_subnet_lookups_total", where: ["outcome": "hit"])
            + total("httpdns_serve_memo_hits_total")
        let misses = total("httpdns_cache_misses")
        let stale = total("httpdns_cache_stale_serves")
        let negative = total("httpdns_cache_negative_hits")
        let relayKept = total("httpdns_serve_relay_lookups_total", where: ["outcome": "kept"])
        let relayAsked = total("httpdns_serve_relay_lookups_total", where: ["outcome": "asked"])
        let answered = hits + stale + negative + relayKept
        let lookups = answered + misses + relayAsked
        cache = Cache(
            hits: hits, misses: misses, staleServes: stale, negativeHits: negative, relayKept: relayKept,
            relayAsked: relayAsked, hitRatio: lookups > 0 ? answered / lookups : nil)
        // Answer times of the answering endpoints: the operator's own (this reading among them) are left out.
        let buckets = Self.buckets(
            (metrics["httpdns_serve_request_duration_seconds_bucket"] ?? []).filter {
                !Self.operatorEndpoints.contains($0.labels["endpoint"] ?? "")
            })
        let count = buckets.last?.count ?? 0
        latency = Latency(
            count: count, p50Milliseconds: Self.quantile(0.5, buckets).map { $0 * 1000 },
            p99Milliseconds: Self.quantile(0.99, buckets).map { $0 * 1000 })
        let sources = Set((metrics["httpdns_upstream_duration_count"] ?? []).compactMap { $0.labels["source"] })
        upstreams = sources.sorted().map { source in
            let answered = total("httpdns_upstream_duration_count", where: ["source": source, "outcome": "success"])
            let seconds = total("httpdns_upstream_duration_sum", where: ["source": source, "outcome": "success"])
            return Upstream(
                source: source, answered: answered,
                failed: total("httpdns_upstream_duration_count", where: ["source": source, "outcome": "failure"]),
                meanMilliseconds: answered > 0 ? seconds / answered * 1000 : nil)
        }
        refusals = Refusals(
            rateLimited: total("httpdns_serve_rate_limited_total"),
            connectionsRefused: total("httpdns_serve_connections_refused_total"),
            upstreamRefused: total("httpdns_serve_upstream_refused_total"),
            udpDropped: total("httpdns_serve_udp_dropped_total"))
        connectionsOpen = total("httpdns_serve_connections_open")
        upstreamInFlight = total("httpdns_serve_upstream_in_flight")
    }

    /// Endpoints that serve the operator, not clients: their requests are not answer times.
    static let operatorEndpoints: Set<String> = [
        "metrics", "stats.json", "dashboard", "healthz", "readyz", "admin/status", "admin/flush", "admin/reload",
    ]

    /// The JSON body of `/stats.json`: keys sorted, so two readings compare line by line.
    var json: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Every field is a string, a finite number or a collection of them: encoding cannot fail.
        return Array((try? encoder.encode(self)) ?? Data("{}".utf8))
    }

    /// The samples of the Prometheus text exposition format (version 0.0.4): `name{label="value",…} value`, one a
    /// line; comments, blank lines and lines that do not parse are skipped.
    static func parse(_ text: String) -> [String: [Sample]] {
        var metrics: [String: [Sample]] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            guard line.first != "#", let sample = sample(line) else { continue }
            metrics[sample.name, default: []].append(Sample(labels: sample.labels, value: sample.value))
        }
        return metrics
    }

    /// One sample line.
    private static func sample(_ line: Substring) -> (name: String, labels: [String: String], value: Double)? {
        var rest = line[...]
        let nameEnd = rest.firstIndex { $0 == "{" || $0 == " " } ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        guard !name.isEmpty else { return nil }
        rest = rest[nameEnd...]
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while let first = rest.first, first != "}" {
                guard let equals = rest.firstIndex(of: "=") else { return nil }
                let key = rest[..<equals].trimmingCharacters(in: .whitespaces)
                rest = rest[rest.index(after: equals)...]
                guard rest.first == "\"" else { return nil }
                rest = rest.dropFirst()
                var value = ""
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(character == "n" ? "\n" : character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
                labels[key] = value
                if rest.first == "," { rest = rest.dropFirst() }
            }
            guard rest.first == "}" else { return nil }
            rest = rest.dropFirst()
        }
        // The value, then perhaps a timestamp. JSON has no infinities or NaN: such samples are left out.
        guard let text = rest.split(separator: " ").first, let value = Double(text), value.isFinite else { return nil }
        return (name, labels, value)
    }

    /// A histogram's cumulative buckets summed over its other labels, by upper bound.
    static func buckets(_ samples: [Sample]) -> [(bound: Double, count: Double)] {
        var byBound: [Double: Double] = [:]
        for sample in samples {
            guard let text = sample.labels["le"] else { continue }
            let bound = text == "+Inf" ? Double.infinity : Double(text)
            if let bound { byBound[bound, default: 0] += sample.value }
        }
        return byBound.sorted { $0.key < $1.key }.map { (bound: $0.key, count: $0.value) }
    }

    /// The `q` quantile of cumulative `buckets`, linear within its bucket as Prometheus's `histogram_quantile` is;
    /// `nil` without observations. A quantile in the `+Inf` bucket is the largest finite bound.
    static func quantile(_ q: Double, _ buckets: [(bound: Double, count: Double)]) -> Double? {
        guard let total = buckets.last?.count, total > 0 else { return nil }
        let rank = q * total
        var lower = 0.0
        var below = 0.0
        for bucket in buckets {
            if bucket.count >= rank {
                guard bucket.bound.isFinite else { return lower }
                let inside = bucket.count - below
                return inside > 0 ? lower + (bucket.bound - lower) * (rank - below) / inside : bucket.bound
            }
            lower = bucket.bound.isFinite ? bucket.bound : lower
            below = bucket.count
        }
        return lower
    }
}
