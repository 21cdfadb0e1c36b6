import Foundation
import TestSupport
import Testing

@testable import HTTPDNSServer

/// The shipped alert rules against a real Prometheus (Debian's `prometheus`) scraping a running `hostsctl serve`:
/// when the upstream dies, the console shows it and the upstream and error-ratio alerts go to firing.
@Suite("hostsctl serve: the shipped alerts fire in a real Prometheus")
struct AlertFiringTests {
    /// The shipped rules with their windows and `for:` durations shortened, so that a test sees them fire in
    /// seconds; the expressions are otherwise the operator's.
    static func shortenedRules() throws -> String {
        var rules = try String(contentsOfFile: DeployAssetsTests.rules, encoding: .utf8)
        for window in ["[5m]", "[10m]", "[1m]"] { rules = rules.replacingOccurrences(of: window, with: "[10s]") }
        for wait in ["for: 5m", "for: 10m", "for: 1m"] { rules = rules.replacingOccurrences(of: wait, with: "for: 2s") }
        return rules
    }

    /// The alerts Prometheus reports (`/api/v1/alerts`): name and state.
    static func alerts(_ port: UInt16) async throws -> [String: String] {
        let output = try await HostsCTLProcess.run(
            executable: "/usr/bin/curl", ["-sS", "--max-time", "5", "http://127.0.0.1:\(port)/api/v1/alerts"])
        guard let object = try? JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any],
            let data = object["data"] as? [String: Any], let alerts = data["alerts"] as? [[String: Any]]
        else { return [:] }
        var states: [String: String] = [:]
        for alert in alerts {
            guard let labels = alert["labels"] as? [String: Any], let name = labels["alertname"] as? String else {
                continue
            }
            // One alert firing is the name's state, whatever its other series say.
            if states[name] != "firing" { states[name] = alert["state"] as? String }
        }
        return states
    }

    @Test("the upstream dies: SERVFAIL on the console at once, HostsctlServeUpstreamDown and the error ratio fire")
    func upstreamDown() async throws {
        let served = try await OperatorCountsTests.Served.start(ecs: "on", timeoutMs: 300)
        defer { served.stop() }
        let directory = try TemporaryFiles()
        try Self.shortenedRules().write(toFile: directory.path("rules.yml"), atomically: true, encoding: .utf8)
        try """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        rule_files: [rules.yml]
        scrape_configs:
          - job_name: hostsctl-serve
            static_configs:
              - targets: ["127.0.0.1:\(served.admin)"]
        """.write(toFile: directory.path("prometheus.yml"), atomically: true, encoding: .utf8)
        let port = try FreePort.tcp()
        let prometheus = try ChildProcess(
            path: "/usr/bin/prometheus",
            arguments: [
                "--config.file=\(directory.path("prometheus.yml"))", "--storage.tsdb.path=\(directory.path("data"))",
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ], logPath: directory.path("prometheus.log"))
        defer { prometheus.stop() }
        #expect(try await offThePool { FreePort.waitUntilAccepting(port: port, while: { prometheus.isRunning }) })
        // Clients ask for names the cache does not hold, a few a second, all along.
        let traffic = Task {
            var index = 0
            while !Task.isCancelled {
                _ = try? await served.curl("/resolve?name=n\(index % TestZone.bulkNames).test")
                index += 1
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { traffic.cancel() }
        try await Task.sleep(for: TestTiming.scaled(.seconds(4)))
        #expect(try await Self.alerts(port)["HostsctlServeUpstreamDown"] == nil, "a live upstream alerts nothing")
        served.dnsmasq.freeze()
        // The console's reading (what /stats.json and the dashboard show) says so at its next refresh.
        try await Task.sleep(for: .seconds(2))
        let stats = try await served.stats()
        #expect((stats.outcomes?["SERVFAIL"] ?? 0) > 0, "\(stats.outcomes)")
        #expect(stats.upstreams.contains { $0.failed > 0 }, "\(stats.upstreams)")
        var states: [String: String] = [:]
        let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(60))
        while ContinuousClock.now < deadline {
            states = try await Self.alerts(port)
            if states["HostsctlServeUpstreamDown"] == "firing", states["HostsctlServeErrorRatio"] == "firing" { break }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(states["HostsctlServeUpstreamDown"] == "firing", "\(states)")
        #expect(states["HostsctlServeErrorRatio"] == "firing", "\(states)")
    }
}
