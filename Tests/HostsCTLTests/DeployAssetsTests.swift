import Foundation
import TestSupport
import Testing

@testable import HTTPDNSServer

/// The Grafana dashboard and the Prometheus alert rules in `Config/deploy`: every metric they name is one a running
/// `hostsctl serve` exports, and promtool (Debian's `prometheus` package) accepts the rules, passes their unit tests
/// and parses every dashboard query.
@Suite("deployment assets")
struct DeployAssetsTests {
    static let rules = "Config/deploy/prometheus/hostsctl-serve-rules.yml"
    static let dashboard = "Config/deploy/grafana/hostsctl-serve.json"

    /// The metric names in `text` (`httpdns_…`, `process_…`).
    static func metricNames(in text: String) -> Set<String> {
        let pattern = try! NSRegularExpression(pattern: #"\b(?:httpdns|process)_[a-z0-9_]+\b"#)
        let range = NSRange(text.startIndex..., in: text)
        return Set(
            pattern.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } })
    }

    /// Every query of the dashboard's panels.
    static func dashboardExpressions() throws -> [String] {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dashboard)))
        var expressions: [String] = []
        func walk(_ value: Any) {
            if let dictionary = value as? [String: Any] {
                if let expression = dictionary["expr"] as? String { expressions.append(expression) }
                dictionary.values.forEach(walk)
            } else if let array = value as? [Any] {
                array.forEach(walk)
            }
        }
        walk(object)
        return expressions
    }

    @Test("every metric the alert rules and the Grafana dashboard name is on a running server's /metrics")
    func metricsExist() async throws {
        let port = try FreePort.tcp()
        let adminPort = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("127.0.0.88 deploy.test\n", name: "hosts")
        let settings = try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides", "cache", "cares"], "systemFallback": false },
              "cares": { "servers": ["127.0.0.1:9"], "timeoutMs": 100, "tries": 1 },
              "overrides": { "file": "\(overrides)" },
              "serve": { "listen": "127.0.0.1:\(port)" }
            }
            """, name: "hostsctl.json")
        let (process, _) = try await ServeCommandTests.startServe(
            settings, port: port, log: "serve-deploy.log", adminPort: adminPort)
        defer { process.stop() }
        #expect(try await offThePool { FreePort.waitUntilAccepting(port: adminPort, while: { process.isRunning }) })
        let client = try await offThePool { try KeepAliveConnection(port: Int(port)) }
        _ = try await offThePool { try client.get("/resolve?name=deploy.test&type=A") }
        let admin = try await offThePool { try KeepAliveConnection(port: Int(adminPort)) }
        let exported = Set(ServiceStats.parse(try await offThePool { try admin.get("/metrics") }.body).keys)
        #expect(exported.contains("process_resident_memory_bytes"))
        #expect(exported.contains("httpdns_serve_memory_limit_bytes"))
        let rules = try String(contentsOfFile: Self.rules, encoding: .utf8)
        let named = Self.metricNames(in: rules).union(Self.metricNames(in: try Self.dashboardExpressions().joined()))
        #expect(named.count >= 15, "\(named.sorted())")
        for name in named.sorted() { #expect(exported.contains(name), "\(name) is not on /metrics") }
    }

    @Test("every alert rule has a unit test that fires it and one that keeps it quiet")
    func everyRuleTested() throws {
        let rules = try String(contentsOfFile: Self.rules, encoding: .utf8)
        let tests = try String(
            contentsOfFile: "Config/deploy/prometheus/hostsctl-serve-rules.test.yml", encoding: .utf8)
        let names = rules.split(separator: "\n").compactMap { line -> String? in
            let text = line.trimmingCharacters(in: .whitespaces)
            return text.hasPrefix("- alert: ") ? String(text.dropFirst("- alert: ".count)) : nil
        }
        #expect(names.count >= 9, "\(names)")
        // Each test case: its alert's name, then whether it expects alerts.
        let cases = tests.components(separatedBy: "alertname: ").dropFirst().map { chunk in
            let name = String(chunk.prefix { !$0.isNewline })
            let quiet = chunk.split(separator: "\n").dropFirst().first?.contains("exp_alerts: []") ?? false
            return (name, quiet)
        }
        for name in names {
            #expect(cases.contains { $0 == (name, false) }, "no test fires \(name)")
            #expect(cases.contains { $0 == (name, true) }, "no test keeps \(name) quiet")
        }
    }

    @Test("promtool checks the rules, passes their unit tests and parses every dashboard query")
    func promtool() async throws {
        let check = try await HostsCTLProcess.run(executable: "/usr/bin/promtool", ["check", "rules", Self.rules])
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
        let test = try await HostsCTLProcess.run(
            executable: "/usr/bin/promtool",
            ["test", "rules", "Config/deploy/prometheus/hostsctl-serve-rules.test.yml"])
        #expect(test.status == 0, "\(test.standardOutput)\(test.standardError)")
        // The dashboard's queries, with Grafana's variables given values, as recording rules promtool parses.
        let expressions = try Self.dashboardExpressions()
        #expect(expressions.count >= 15)
        var file = "groups:\n  - name: dashboard\n    rules:\n"
        for (index, expression) in expressions.enumerated() {
            let concrete = expression.replacingOccurrences(of: "$__rate_interval", with: "5m")
                .replacingOccurrences(of: "$instance", with: ".*")
            let quoted = concrete.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
                of: "\"", with: "\\\"")
            file += "      - record: dashboard_query_\(index)\n        expr: \"\(quoted)\"\n"
        }
        let path = try TemporaryFiles.file(file, name: "dashboard-queries.yml")
        let parsed = try await HostsCTLProcess.run(executable: "/usr/bin/promtool", ["check", "rules", path])
        #expect(parsed.status == 0, "\(parsed.standardOutput)\(parsed.standardError)")
    }
}
