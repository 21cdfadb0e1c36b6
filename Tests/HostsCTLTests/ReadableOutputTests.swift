import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HostsCTLCommands

/// Output people read right: TTLs that never expire and TTLs the cache changed say so, scores are shown as what they
/// are, probe says by which rule it ranks, and top fails in one line when it cannot reach the server.
@Suite("hostsctl: output read right")
struct ReadableOutputTests {
    static func address(latency: Double?, successes: Int, failures: Int, penalty: Double = 0) -> RankedAddress {
        RankedAddress(
            ip: IPAddress(ipv4: 192, 0, 2, 1), rank: 1, score: (latency ?? 250) + penalty, latencyMilliseconds: latency,
            successes: successes, failures: failures, penaltyMilliseconds: penalty)
    }

    @Test("a score reads as a connect time and a count of failures; the penalty only in the JSON")
    func scores() throws {
        #expect(ResolveReport.scoreLabel(Self.address(latency: nil, successes: 0, failures: 0)) == "-")
        #expect(ResolveReport.scoreLabel(Self.address(latency: 12.34, successes: 3, failures: 0)) == "12.3 ms")
        let failing = Self.address(latency: 12.34, successes: 3, failures: 2, penalty: 50_000)
        #expect(ResolveReport.scoreLabel(failing) == "12.3 ms, failed 2 of 5")
        #expect(!ResolveReport.scoreLabel(failing).contains("50"))
        #expect(
            ResolveReport.scoreLabel(Self.address(latency: nil, successes: 0, failures: 4, penalty: 10))
                == "failed 4 of 4")
    }

    @Test("localhost and literals: permanent in the table, null TTL in the JSON; a clamped TTL names the upstream's")
    func ttls() async throws {
        try await DNSMasq.with(records: TestZone.records + ["host-record=short.test,192.0.2.99,5"]) { server in
            let cares = try CAresResolver(configuration: .init(servers: [server.address], timeout: .seconds(2)))
            defer { cares.shutdown() }
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], prober: nil,
                configuration: .parts(probing: nil))
            var reports: [ResolveReport] = []
            for host in ["localhost", "192.0.2.9", "short.test", "multi.test"] {
                let answer = try await resolver.resolveRanked(host, family: .ipv4)
                reports.append(ResolveReport(host: host, outcome: .success(answer), elapsed: .milliseconds(1)))
            }
            let text = ResolveReport.text(reports)
            #expect(!text.contains("2147483647"), "\(text)")
            #expect(text.contains("permanent"), "\(text)")
            #expect(text.contains("30 (clamped from 5)"), "\(text)")
            #expect(text.contains("  300  "), "multi.test's TTL is its own: \(text)")
            let parsed = try #require(
                try JSONSerialization.jsonObject(with: Data(ResolveReport.json(reports).utf8)) as? [[String: Any]])
            let localhost = try #require((parsed[0]["addresses"] as? [[String: Any]])?.first)
            #expect(localhost["ttl"] is NSNull && localhost["permanent"] as? Bool == true)
            #expect(localhost["score"] is NSNull, "an unmeasured address has no score to show")
            let short = try #require((parsed[2]["addresses"] as? [[String: Any]])?.first)
            #expect(short["ttl"] as? Int == 30 && short["ttlFromUpstream"] as? Int == 5)
            let multi = try #require((parsed[3]["addresses"] as? [[String: Any]])?.first)
            #expect(multi["ttlFromUpstream"] is NSNull)
            await resolver.shutdown()
        }
    }

    @Test("a bad line of an overrides file: reported once, as a skipped line's warning, and the good lines answer")
    func skippedLineOnce() async throws {
        let hosts = try TemporaryFiles.file("127.0.0.5 good.test\nnot-an-ip bad.test\n", name: "bad.hosts")
        let output = try await HostsCTLProcess.run(["resolve", "--hosts", hosts, "--no-cache", "good.test"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("127.0.0.5"))
        let reports = output.standardError.components(separatedBy: "not-an-ip").count - 1
        #expect(reports == 1, "\(output.standardError)")
        #expect(output.standardError.contains("warning") && !output.standardError.contains("error:"))
    }

    @Test("top against a port nothing listens on: one line on standard error and exit status 1")
    func topUnreachable() async throws {
        let closed = try TCPListener(ip: "127.0.0.1", listening: false)
        defer { closed.close() }
        let output = try await HostsCTLProcess.run(["top", "--admin", "127.0.0.1:\(closed.port)", "--count", "1"])
        #expect(output.status == 1)
        let lines = output.standardError.split(separator: "\n")
        #expect(lines.count == 1, "\(output.standardError)")
        #expect(
            output.standardError.contains("cannot read 127.0.0.1:\(closed.port): connection refused"),
            "\(output.standardError)")
        #expect(output.standardOutput.isEmpty)
    }
}
