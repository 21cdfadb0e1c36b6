import Foundation
import TestSupport
import Testing

@testable import HTTPDNSServer

/// What the operator reads on `/metrics` (and so on the console, `top` and OTLP, which read the same counters) is
/// what happened: a running `hostsctl serve` asked over every transport and API, with EDNS Client Subnet on and off,
/// counts each query the upstream (a real dnsmasq, logging what it receives) saw, each answer by its DNS outcome,
/// and each lookup as a hit or a miss of some cache.
@Suite("hostsctl serve: counters against what the upstream saw")
struct OperatorCountsTests {
    /// A running server in front of a logging dnsmasq, with every listener: HTTPS (DoH, JSON, vendor), UDP and TCP,
    /// DNS over TLS, and the admin listener.
    struct Served {
        let dnsmasq: DNSMasq
        let process: ChildProcess
        let log: String
        let certificates: TestCertificates
        let https: UInt16
        let dns: UInt16
        let dot: UInt16
        let admin: UInt16

        /// `cache`: more keys of the `cache` section (each followed by a comma); `records`: dnsmasq's zone.
        static func start(
            ecs: String, extra: String = "", timeoutMs: Int = 3000, cache: String = "",
            records: [String] = []
        ) async throws -> Served {
            let dnsmasq = try await DNSMasq.start(records: TestZone.records + records, logsQueries: true)
            let certificates = try TestCertificates()
            let leaf = try certificates.leaf(for: "dot.test", ip: "127.0.0.1")
            let (https, dot, admin) = (try FreePort.tcp(), try FreePort.tcp(), try FreePort.tcp())
            let dns = try FreePort.udpAndTCP()
            let settings = try TemporaryFiles.file(
                """
                {
                  "sources": { "order": ["cache", "cares"], "systemFallback": false },
                  "cares": { "servers": ["\(dnsmasq.address)"], "timeoutMs": \(timeoutMs), "tries": 1 },
                  "probe": { "enabled": false },
                  "cache": { \(cache) "path": "\(TemporaryFiles.path("cache.json"))" },
                  "serve": {
                    "listen": "127.0.0.1:\(https)", "certificate": "\(leaf.certificatePath)",
                    "privateKey": "\(leaf.keyPath)",
                    "dns": { "listen": "127.0.0.1:\(dns)" }, "dot": { "listen": "127.0.0.1:\(dot)" },
                    "ecs": { "mode": "\(ecs)" }, "otherTypes": "forward"\(extra)
                  }
                }
                """, name: "hostsctl.json")
            // At info, the access log: one line per request, with its DNS outcome.
            let (process, log) = try await ServeCommandTests.startServe(
                settings, port: https, log: "serve-counts-\(ecs).log", adminPort: admin,
                environment: ["HOSTSCTL_LOG_LEVEL": "info"])
            return Served(
                dnsmasq: dnsmasq, process: process, log: log, certificates: certificates, https: https, dns: dns,
                dot: dot,
                admin: admin)
        }

        func stop() {
            process.stop()
            dnsmasq.stop()
            certificates.remove()
        }

        /// kdig's answer status for `name` over `transport` (`+notcp`, `+tcp`, `+tls`, `+https`).
        /// `options`: more of kdig's options (`+edns`).
        func kdig(_ name: String, type: String = "A", _ transport: String, options more: [String] = [])
            async throws -> String
        {
            let tls = ["+tls-ca=\(certificates.caPath)", "+tls-hostname=dot.test"]
            let (port, options): (UInt16, [String]) =
                switch transport {
                case "+tls": (dot, [transport] + tls)
                case "+https": (https, [transport] + tls)
                default: (dns, [transport])
                }
            let output = try await HostsCTLProcess.run(
                executable: "/usr/bin/kdig",
                ["@127.0.0.1", "-p", "\(port)"] + options + more + ["+timeout=10", "+retry=0", name, type])
            return output.standardOutput + output.standardError
        }

        /// curl's body for `target` on the HTTPS listener, the certificate checked for `dot.test`.
        func curl(_ target: String) async throws -> String {
            let output = try await HostsCTLProcess.run(
                executable: "/usr/bin/curl",
                [
                    "-sS", "--max-time", "10", "--cacert", certificates.caPath, "--resolve",
                    "dot.test:\(https):127.0.0.1", "https://dot.test:\(https)\(target)",
                ])
            return output.standardOutput + output.standardError
        }

        /// The server's counters, as `/stats.json` sums them from `/metrics`.
        func stats() async throws -> ServiceStats {
            let connection = try await offThePool { try KeepAliveConnection(port: Int(admin)) }
            let metrics = try await offThePool { try connection.get("/metrics") }
            return ServiceStats(exposition: metrics.body, time: 0)
        }
    }

    @Test(
        "every path counts what the upstream saw: UDP, TCP, DoT, DoH, JSON, vendor, a relayed type; answers by rcode",
        arguments: ["on", "off"])
    func everyPath(ecs: String) async throws {
        let served = try await Served.start(ecs: ecs, extra: #", "probeGuardedAddresses": true"#)
        defer { served.stop() }
        let before = served.dnsmasq.queriesSeen().count
        #expect(try await served.kdig("n1.test", "+notcp").contains("10.1.0.1"))
        #expect(try await served.kdig("n2.test", "+tcp").contains("10.1.0.2"))
        #expect(try await served.kdig("n3.test", "+tls").contains("10.1.0.3"))
        #expect(try await served.kdig("n4.test", "+https").contains("10.1.0.4"))
        #expect(try await served.curl("/resolve?name=n5.test").contains("10.1.0.5"))
        #expect(try await served.curl("/d?dn=n6.test").contains("10.1.0.6"))
        #expect(try await served.kdig("missing.test", "+notcp").contains("NXDOMAIN"))
        #expect(try await served.kdig("n7.test", type: "TXT", "+notcp").contains("NOERROR"))
        // Answered from the cache: nothing goes upstream.
        #expect(try await served.kdig("n1.test", "+tcp").contains("10.1.0.1"))
        // Three queries on one connection: one goes upstream, the others come from the cache or from the answers
        // the connection's loop keeps encoded, counted as hits either way.
        let kept = try await HostsCTLProcess.run(
            executable: "/usr/bin/kdig",
            ["@127.0.0.1", "-p", "\(served.dns)", "+tcp", "+keepopen", "+timeout=10", "+retry=0"]
                + ["n9.test", "A", "n9.test", "A", "n9.test", "A"])
        #expect(kept.standardOutput.components(separatedBy: "10.1.0.9").count - 1 >= 3, "\(kept.standardOutput)")
        let seen = try await waitForQueries(served.dnsmasq, count: before + 9)
        #expect(seen.count - before == 9, "dnsmasq saw: \(seen.dropFirst(before))")
        let stats = try await served.stats()
        let upstreamQueries = stats.upstreams.reduce(0) { $0 + $1.answered + $1.failed }
        #expect(upstreamQueries == 9, "\(stats.upstreams)")
        #expect(stats.upstreams.allSatisfy { $0.failed == 0 }, "\(stats.upstreams)")
        #expect(stats.outcomes?["NOERROR"] == 11 && stats.outcomes?["NXDOMAIN"] == 1, "\(stats.outcomes)")
        #expect(stats.outcomes?["SERVFAIL"] ?? 0 == 0)
        // Every lookup is a hit or a miss of one cache, once: 9 went upstream (8 lookups, 1 relayed), 3 hits.
        #expect(stats.cache.misses + (stats.cache.relayAsked ?? 0) == 9, "\(stats.cache)")
        #expect(
            stats.cache.hits + stats.cache.staleServes + stats.cache.negativeHits + (stats.cache.relayKept ?? 0) == 3,
            "\(stats.cache)")
        #expect(abs((stats.cache.hitRatio ?? 0) - 3.0 / 12) < 1e-9)
    }

    @Test(
        "a dead upstream: every transport's answer is SERVFAIL in the counters and the upstream's failures counted",
        arguments: ["on", "off"])
    func deadUpstream(ecs: String) async throws {
        let served = try await Served.start(ecs: ecs, extra: #", "probeGuardedAddresses": true"#, timeoutMs: 300)
        defer { served.stop() }
        served.dnsmasq.freeze()
        _ = try await served.kdig("n1.test", "+notcp")
        _ = try await served.kdig("n2.test", "+tcp")
        _ = try await served.kdig("n3.test", "+https")
        _ = try await served.curl("/resolve?name=n4.test")
        _ = try await served.curl("/d?dn=n5.test")
        _ = try await served.kdig("n6.test", type: "TXT", "+notcp")
        let stats = try await served.stats()
        #expect(stats.outcomes?["SERVFAIL"] == 6, "\(stats.outcomes)")
        #expect(stats.outcomes?["NOERROR"] ?? 0 == 0)
        let failed = stats.upstreams.reduce(0) { $0 + $1.failed }
        #expect(failed == 6, "\(stats.upstreams)")
        #expect(stats.upstreams.reduce(0) { $0 + $1.answered } == 0)
    }

    @Test("answers the private-address guard withholds: NXDOMAIN to the client, WITHHELD in the counters and the log")
    func withheld() async throws {
        let served = try await Served.start(ecs: "off")
        defer { served.stop() }
        let udp = try await served.kdig("n1.test", "+notcp")
        #expect(udp.contains("NXDOMAIN"), "\(udp)")
        let json = try await served.curl("/resolve?name=n2.test")
        #expect(json.contains("\"Status\":3"), "\(json)")
        let stats = try await served.stats()
        #expect(stats.outcomes?["WITHHELD"] == 2 && stats.outcomes?["NXDOMAIN"] ?? 0 == 0, "\(stats.outcomes)")
        let log = try String(contentsOfFile: served.log, encoding: .utf8)
        #expect(log.contains("rcode=WITHHELD"), "\(log)")
        // The log level is the command's own variable, not a setting it calls unknown.
        #expect(!log.contains("HOSTSCTL_LOG_LEVEL is not a known setting"), "\(log)")
        // The upstream answered: the guard's decision is not the upstream's failure.
        #expect(stats.upstreams.reduce(0) { $0 + $1.failed } == 0, "\(stats.upstreams)")
    }

    /// dnsmasq's query log once it holds `count` queries (it writes as it answers, but not before the client has
    /// its answer).
    func waitForQueries(_ dnsmasq: DNSMasq, count: Int) async throws -> [String] {
        for _ in 0..<50 {
            let seen = dnsmasq.queriesSeen()
            if seen.count >= count { return seen }
            try await Task.sleep(for: .milliseconds(100))
        }
        return dnsmasq.queriesSeen()
    }
}
