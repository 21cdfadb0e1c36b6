import Foundation
import Logging
import Prometheus
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// `/stats.json` read from the Prometheus text: samples, labels, sums, the cache's hit ratio, percentiles.
@Suite("service stats")
struct ServiceStatsTests {
    static let exposition = #"""
        # HELP httpdns_serve_queries_total Queries by transport
        # TYPE httpdns_serve_queries_total counter
        httpdns_serve_queries_total{transport="udp"} 90
        httpdns_serve_queries_total{transport="https"} 10
        httpdns_serve_requests_total{endpoint="resolve",status="200"} 7
        httpdns_serve_requests_total{endpoint="dns-query",status="429"} 3
        httpdns_cache_hits 80
        httpdns_cache_misses 15
        httpdns_cache_stale_serves 4
        httpdns_cache_negative_hits 1
        httpdns_serve_request_duration_seconds_bucket{endpoint="dns-query",le="0.005"} 50
        httpdns_serve_request_duration_seconds_bucket{endpoint="dns-query",le="0.01"} 90
        httpdns_serve_request_duration_seconds_bucket{endpoint="dns-query",le="0.025"} 100
        httpdns_serve_request_duration_seconds_bucket{endpoint="dns-query",le="+Inf"} 100
        httpdns_serve_request_duration_seconds_bucket{endpoint="metrics",le="0.005"} 0
        httpdns_serve_request_duration_seconds_bucket{endpoint="metrics",le="+Inf"} 1000
        httpdns_upstream_duration_count{source="cares",outcome="success"} 4
        httpdns_upstream_duration_sum{source="cares",outcome="success"} 0.02
        httpdns_upstream_duration_count{source="cares",outcome="failure"} 2
        httpdns_serve_rate_limited_total 3
        httpdns_serve_connections_open 12.0
        odd_label{path="a \"quoted\" \\ back\nslash"} 1 1700000000000
        not_a_number{x="y"} NaN
        broken{x=y} 1
        """#

    @Test("samples with labels (escapes too) and timestamps; NaN and broken lines left out; sums and ratios")
    func summary() throws {
        let stats = ServiceStats(exposition: Self.exposition, time: 1_700_000_000.5)
        #expect(stats.queries == ["udp": 90, "https": 10])
        #expect(stats.answers.map(\.endpoint) == ["dns-query", "resolve"] && stats.answers.map(\.count) == [3, 7])
        #expect(stats.cache.hitRatio == 0.85)
        #expect(stats.refusals.rateLimited == 3 && stats.connectionsOpen == 12)
        #expect(stats.upstreams.count == 1)
        #expect(stats.upstreams.first?.answered == 4 && stats.upstreams.first?.failed == 2)
        #expect(abs((stats.upstreams.first?.meanMilliseconds ?? 0) - 5) < 1e-9)
        #expect(stats.metrics["odd_label"]?.first?.labels["path"] == "a \"quoted\" \\ back\nslash")
        #expect(stats.metrics["not_a_number"] == nil && stats.metrics["broken"] == nil)
        // Percentiles as histogram_quantile computes them, from the answering endpoints only (not /metrics).
        #expect(stats.latency.count == 100)
        #expect(abs((stats.latency.p50Milliseconds ?? 0) - 5) < 1e-9)
        #expect(abs((stats.latency.p99Milliseconds ?? 0) - 23.5) < 1e-9)
        // The JSON reads back as it was written.
        let decoded = try JSONDecoder().decode(ServiceStats.self, from: Data(stats.json))
        #expect(decoded == stats)
    }

    @Test(
        "no observations: no percentiles, no hit ratio (shown as –); a quantile past the last finite bound is that bound"
    )
    func empty() {
        let stats = ServiceStats(exposition: "", time: 0)
        #expect(stats.latency.p50Milliseconds == nil && stats.cache.hitRatio == nil && stats.queries.isEmpty)
        #expect(ServiceStats.quantile(0.99, [(bound: 0.1, count: 1), (bound: .infinity, count: 100)]) == 0.1)
    }

    @Test("answers counted as sent: over UDP a dropped (429) or truncated-to-TCP (503) query is no answer")
    func outcomesAsSent() {
        let limited = ServiceResponse.text(429, "slow down")
        let busy = ServiceResponse.text(503, "busy")
        #expect(HTTPDNSService.outcome(limited, over: .udp) == nil)
        #expect(HTTPDNSService.outcome(busy, over: .udp) == nil)
        #expect(HTTPDNSService.outcome(limited, over: .tcp) == .refused)
        #expect(HTTPDNSService.outcome(busy, over: .https) == .serverFailure)
        #expect(HTTPDNSService.outcome(.text(400, "bad"), over: .udp) == .formatError)
    }

    @Test("a reading of a server of an earlier release, without rcodes or relay counts, still decodes")
    func earlierServer() throws {
        let stats = ServiceStats(exposition: Self.exposition, time: 1)
        var object = try #require(try JSONSerialization.jsonObject(with: Data(stats.json)) as? [String: Any])
        object["outcomes"] = nil
        var cache = try #require(object["cache"] as? [String: Any])
        cache["relayKept"] = nil
        cache["relayAsked"] = nil
        object["cache"] = cache
        let decoded = try JSONDecoder().decode(
            ServiceStats.self, from: try JSONSerialization.data(withJSONObject: object))
        #expect(decoded.outcomes == nil && decoded.cache.relayKept == nil && decoded.queries == stats.queries)
    }

    @Test("/stats.json?name= shows the server's order of a cached name and each reporting network's; a bad name is 400")
    func steering() async throws {
        let pipeline = try await OperationsTests.Pipeline.start()
        let registry = PrometheusCollectorRegistry()
        let service = HTTPDNSService(
            resolver: pipeline.resolver,
            configuration: .init(acceptClientReports: true, reportNetworks: [IPNetwork("10.0.0.0/8")!]),
            logger: OperationsTests.logger, metricsFactory: PrometheusMetricsFactory(registry: registry),
            metricsExporter: { registry.emitToBuffer() })
        // Cached: 192.0.2.1 and 192.0.2.2.
        #expect(await service.handle(ServiceRequest(method: "GET", target: "/resolve?name=multi.test")).status == 200)
        func stats(_ target: String) async throws -> (status: Int, stats: ServiceStats?) {
            let response = await service.handle(ServiceRequest(method: "GET", target: target, listener: .admin))
            return (response.status, try? JSONDecoder().decode(ServiceStats.self, from: Data(response.body)))
        }
        let before = try #require(try await stats("/stats.json?name=multi.test").stats?.steering)
        #expect(before.host == "multi.test")
        try #require(before.addresses.count == 2, "\(before)")
        #expect(Set(before.addresses.map(\.ip)) == ["192.0.2.1", "192.0.2.2"])
        #expect(before.addresses.map(\.rank) == [1, 2] && before.networks.isEmpty)
        // Three client networks say the server's first address fails and the second connects at once.
        let (first, second) = (before.addresses[0].ip, before.addresses[1].ip)
        for client in ["10.1.0.1", "10.2.0.1", "10.3.0.1"] {
            for json in [
                #"{"host":"multi.test","ip":"\#(first)","failed":true}"#,
                #"{"host":"multi.test","ip":"\#(second)","connectMs":0}"#,
            ] {
                let status = await service.handle(
                    ServiceRequest(method: "POST", target: "/report", body: Array(json.utf8), client: IPAddress(client))
                ).status
                #expect(status == 204)
            }
        }
        let after = try #require(try await stats("/stats.json?name=multi.test").stats?.steering)
        #expect(!after.networks.isEmpty, "\(after)")
        for network in after.networks { #expect(network.order == [second, first], "\(network)") }
        // Not cached: no addresses; not a name: 400; without a name, no steering at all.
        #expect(try await stats("/stats.json?name=absent.test").stats?.steering?.addresses.isEmpty == true)
        #expect(try await stats("/stats.json?name=bad..name").status == 400)
        #expect(try await stats("/stats.json").stats?.steering == nil)
        await pipeline.stop()
    }

    @Test("the busiest names: sampled, case-insensitive, bounded, and a flood of new names keeps the busy ones")
    func busiestNames() {
        let names = BusyNames(sampleEvery: 1, capacity: 3)
        for _ in 0..<5 { names.observe("A.test") }
        for _ in 0..<3 { names.observe("b.test") }
        names.observe("c.test")
        #expect(names.top(3).map(\.name) == ["a.test", "b.test", "c.test"])
        #expect(names.top(1).first?.requests == 5 && abs((names.top(1).first?.share ?? 0) - 5.0 / 9) < 1e-9)
        // Full: a new name halves every count first, and the names asked once make room.
        names.observe("d.test")
        #expect(names.top(3).map(\.name) == ["a.test", "b.test", "d.test"])
        // A flood of names asked once each (a random-subdomain attack) while a.test is still asked now and then:
        // the flood churns the bottom, a.test stays on top.
        let wide = BusyNames(sampleEvery: 1, capacity: 16)
        for index in 0..<5_000 {
            wide.observe("random-\(index).test")
            if index % 4 == 0 { wide.observe("a.test") }
        }
        #expect(wide.top(1).first?.name == "a.test", "\(wide.top(3))")
        // Sampling: one request in four reaches the table, and the estimate scales back up.
        let sampled = BusyNames(sampleEvery: 4, capacity: 8)
        for _ in 0..<40 { sampled.observe("x.test") }
        #expect(sampled.top(1).first?.requests == 40)
    }
}
