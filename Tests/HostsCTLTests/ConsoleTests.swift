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
        // A server that is not there is said, not a crash.
        let absent = try await HostsCTLProcess.run([
            "top", "--admin", "127.0.0.1:\(try FreePort.tcp())", "--count", "1", "--plain",
        ])
        #expect(absent.status == 0 && absent.standardOutput.contains("hostsctl top: 127.0.0.1:"))
    }
}
