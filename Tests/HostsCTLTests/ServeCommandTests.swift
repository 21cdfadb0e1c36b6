import Foundation
import TestSupport
import Testing

@testable import HTTPDNS

/// `hostsctl serve` as a real process: the settings file's pipeline answered over DoH, a graceful stop on SIGTERM.
@Suite("hostsctl serve")
struct ServeCommandTests {
    @Test("serve answers DoH from the settings' pipeline and stops cleanly on SIGTERM")
    func serveProcess() async throws {
        let port = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("127.0.0.88 served.test\n", name: "hosts")
        let settings = try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" },
              "serve": { "listen": "127.0.0.1:\(port)", "maxAnswers": 4 }
            }
            """, name: "hostsctl.json")
        let log = TemporaryFiles.path("serve.log")
        let process = try ChildProcess(
            path: HostsCTLProcess.executable, arguments: ["serve", "--config", settings], logPath: log)
        defer { process.stop() }
        let up = try await offThePool { FreePort.waitUntilAccepting(port: port, while: { process.isRunning }) }
        #expect(up, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let transport = try HTTPDNSTransport()
        let client = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .post),
                endpoints: [try HTTPDNSEndpoint("http://127.0.0.1:\(port)/dns-query")], allowNonPublicAddresses: true),
            transport: transport)
        let answer = try await client.resolve("served.test", family: .ipv4)
        #expect(answer.addresses.map(\.ip.description) == ["127.0.0.88"])
        await #expect(throws: DNSError.self) { try await client.resolve("other.test", family: .ipv4) }
        await transport.shutdown()
        kill(process.pid, SIGTERM)
        let status = try await offThePool { process.wait() }
        #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    @Test("serve refuses a listen address that is not IP:PORT and an account whose secret variable is unset")
    func badSettings() async throws {
        let bad = try await HostsCTLProcess.run(["serve", "--listen", "localhost"])
        #expect(bad.status != 0)
        let settings = try TemporaryFiles.file(
            #"{ "sources": { "order": ["overrides"] }, "serve": { "listen": "127.0.0.1:1", "accounts": ["a1:UNSET_SECRET_VAR"] } }"#,
            name: "hostsctl.json")
        let unset = try await HostsCTLProcess.run(["serve", "--config", settings])
        #expect(unset.status != 0)
        #expect(unset.standardError.contains("UNSET_SECRET_VAR"))
    }
}
