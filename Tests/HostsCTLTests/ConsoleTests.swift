import Foundation
import TestSupport
import Testing

@testable import HTTPDNSServer

/// The operator's console on a running `hostsctl serve`: `/stats.json`, the dashboard page and `hostsctl top`, all on
/// the admin listener and nowhere else.
@Suite("operator console")
struct ConsoleTests {
    @Test("/stats.json is the picture /metrics gives, the dashboard is self-contained, hostsctl top shows rates")
    func console() async throws {
        let port = try FreePort.tcp()
        let adminPort = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("127.0.0.88 console.test\n", name: "hosts")
        let settings = try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" },
              "serve": { "listen": "127.0.0.1:\(port)" }
            }
            """, name: "hostsctl.json")
        let (process, _) = try await ServeCommandTests.startServe(
            settings, port: port, log: "serve-console.log", adminPort: adminPort)
        defer { process.stop() }
        let adminUp = try await offThePool {
            FreePort.waitUntilAccepting(port: adminPort, while: { process.isRunning })
        }
        #expect(adminUp)
        let client = try await offThePool { try KeepAliveConnection(port: Int(port)) }
        for _ in 0..<25 {
            #expect(try await offThePool { try client.get("/resolve?name=console.test&type=A") }.status == 200)
        }
        let admin = try await offThePool { try KeepAliveConnection(port: Int(adminPort)) }
        // /stats.json and /metrics asked at once come from one rendering: the same samples.
        let json = try await offThePool { try admin.exchange("/stats.json") }
        let text = try await offThePool { try admin.get("/metrics") }
        #expect(json.status == 200 && json.headers["content-type"] == "application/json")
        let stats = try JSONDecoder().decode(ServiceStats.self, from: Data(json.body.utf8))
        #expect(stats.metrics == ServiceStats.parse(text.body), "/stats.json and /metrics disagree")
        #expect(stats.queries["http"] == 25)
        #expect(stats.answers.contains { $0.endpoint == "resolve" && $0.status == "200" && $0.count == 25 })
        #expect(stats.latency.count >= 25 && stats.latency.p50Milliseconds != nil)
        #expect(abs(stats.time - Date().timeIntervalSince1970) < 60)
        #expect(stats.busiestNames.first?.name == "console.test", "\(stats.busiestNames)")

        // The dashboard: at / and /dashboard, one page with nothing fetched from elsewhere, kept to itself.
        for target in ["/", "/dashboard"] {
            let page = try await offThePool { try admin.exchange(target) }
            #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8", "\(target)")
            #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            #expect(page.headers["x-content-type-options"] == "nosniff")
            #expect(page.body.contains(#"id="qps""#) && page.body.contains("/stats.json"))
            #expect(!page.body.contains("http://") && !page.body.contains("https://") && !page.body.contains("src="))
            #expect(!page.body.contains("innerHTML"), "values reach the page as text only")
        }
        // None of the operator's endpoints on the public listener.
        for target in ["/", "/dashboard", "/stats.json", "/metrics"] {
            #expect(try await offThePool { try client.get(target) }.status == 404, "\(target) on the public listener")
        }

        // hostsctl top: two screens, the second with rates. The queries come first, and the rendering /metrics and
        // /stats.json share is kept a second, so both screens count them whatever the machine's pace.
        for _ in 0..<10 { _ = try await offThePool { try client.get("/resolve?name=console.test&type=A") } }
        try await Task.sleep(for: .milliseconds(1100))
        let output = try await HostsCTLProcess.run([
            "top", "--admin", "127.0.0.1:\(adminPort)", "--count", "2", "--interval", "1", "--plain",
        ])
        #expect(output.status == 0, "\(output.standardError)")
        let screens = output.standardOutput.components(separatedBy: "hostsctl serve at 127.0.0.1:\(adminPort)")
        #expect(screens.count == 3, "\(output.standardOutput)")
        #expect(screens.dropFirst().first?.contains("queries/s -") == true, "the first screen has no rates")
        let last = screens.last ?? ""
        #expect(!last.contains("queries/s -"), "the second screen has rates: \(last)")
        for screen in screens.dropFirst() {
            let resolveRow = screen.split(separator: "\n").first { $0.hasPrefix("resolve ") }
            #expect(resolveRow?.split(separator: " ").last == "35", "\(screen)")
        }
        // A name's steering: answered from the overrides here, so not in the cache.
        let steering = try await HostsCTLProcess.run([
            "top", "--admin", "127.0.0.1:\(adminPort)", "--count", "1", "--plain", "--name", "console.test",
        ])
        #expect(steering.status == 0 && steering.standardOutput.contains("console.test: not in the cache"))
        let badName = try await HostsCTLProcess.run(["top", "--admin", "127.0.0.1:\(adminPort)", "--name", "a..b"])
        #expect(badName.status != 0 && badName.standardError.contains("is not a host name"))
        // A server that is not there is said in one line and a failure, not a crash (ReadableOutputTests).
        let absent = try await HostsCTLProcess.run([
            "top", "--admin", "127.0.0.1:\(try FreePort.tcp())", "--count", "1", "--plain",
        ])
        #expect(absent.status == 1 && absent.standardError.contains("hostsctl top: cannot read 127.0.0.1:"))
    }

    @Test("the dashboard in headless Chromium under load: its numbers move and agree with /stats.json")
    func dashboardInBrowser() async throws {
        let port = try FreePort.tcp()
        let adminPort = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("127.0.0.88 console.test\n", name: "hosts")
        let settings = try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" },
              "serve": { "listen": "127.0.0.1:\(port)" }
            }
            """, name: "hostsctl.json")
        let (process, _) = try await ServeCommandTests.startServe(
            settings, port: port, log: "serve-browser.log", adminPort: adminPort)
        defer { process.stop() }
        let adminUp = try await offThePool {
            FreePort.waitUntilAccepting(port: adminPort, while: { process.isRunning })
        }
        #expect(adminUp)
        // A client asking all along, one request at a time on one connection.
        let load = Task {
            let client = try await offThePool { try KeepAliveConnection(port: Int(port)) }
            while !Task.isCancelled {
                _ = try await offThePool { try client.get("/resolve?name=console.test&type=A") }
            }
        }
        defer { load.cancel() }
        // HTTPDNS_WRITE_SCREENSHOTS=1 writes the picture docs/serving.md shows.
        let screenshot =
            ProcessInfo.processInfo.environment["HTTPDNS_WRITE_SCREENSHOTS"] == "1"
            ? "docs/images/serve-dashboard.png" : TemporaryFiles.path("serve-dashboard.png")
        let probe = try await HostsCTLProcess.run(
            executable: "/usr/bin/python3",
            [
                "Tests/Browser/dashboard_probe.py", "http://127.0.0.1:\(adminPort)/", "--readings", "2", "--gap", "2.5",
                "--screenshot", screenshot, "--timeout", "\(Int(TestTiming.scaled(.seconds(30)).components.seconds))",
            ])
        #expect(probe.status == 0, "\(probe.standardError)")
        let admin = try await offThePool { try KeepAliveConnection(port: Int(adminPort)) }
        let after = try JSONDecoder().decode(
            ServiceStats.self, from: Data(try await offThePool { try admin.get("/stats.json") }.body.utf8))
        struct Reading: Decodable {
            var qps: String
            var p50: String
            var error: String
            var transports: [[String]]
            var httpTotal: Double? { transports.first { $0.first == "http" }.flatMap { Double($0[2]) } }
        }
        let readings =
            try JSONDecoder().decode([String: [Reading]].self, from: Data(probe.standardOutput.utf8))[
                "readings"] ?? []
        #expect(readings.count == 2, "\(probe.standardOutput)")
        guard let first = readings.first, let second = readings.last, readings.count == 2 else { return }
        #expect(first.error.isEmpty && second.error.isEmpty)
        // The numbers move under load, and the page never shows more than the server counted.
        let firstTotal = try #require(first.httpTotal)
        let secondTotal = try #require(second.httpTotal)
        #expect(secondTotal > firstTotal, "\(readings)")
        #expect(secondTotal <= after.queries["http"] ?? 0)
        // A rate, from two readings (its value depends on how the load ran in the last second: on a loaded machine
        // the client may have waited through it).
        #expect(Double(second.qps) != nil, "\(second.qps)")
        #expect(second.p50.hasSuffix(" ms"))
        #expect(FileManager.default.fileExists(atPath: screenshot))
    }
}
