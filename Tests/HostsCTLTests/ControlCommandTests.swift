import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSServer
@testable import HostsCTLCommands

/// `hostsctl control` against a running `hostsctl serve` in front of a logging dnsmasq: the status says what runs and
/// how the upstreams fare, a flush sends the next query upstream again, a reload applies an edit or keeps the last good
/// settings; the control calls take POST only, and nothing a web page sends.
@Suite("hostsctl control: status, flush, reload on a running server")
struct ControlCommandTests {
    /// A server with every DNS listener, the relay of other types, and a settings file the test can edit (not
    /// watched: only the control calls reload it, so what a reload says is the control call's).
    struct Running {
        let dnsmasq: DNSMasq
        let process: ChildProcess
        let log: String
        let settings: String
        let http: UInt16
        let dns: UInt16
        let admin: UInt16

        static func settingsText(dnsmasq: DNSMasq, http: UInt16, dns: UInt16, maxAnswers: Int) -> String {
            """
            {
              "sources": { "order": ["cache", "cares"], "systemFallback": false },
              "reload": { "intervalMs": 0 },
              "cares": { "servers": ["\(dnsmasq.address)"], "timeoutMs": 300, "tries": 1 },
              "probe": { "enabled": false },
              "cache": { "path": "\(TemporaryFiles.path("cache.json"))" },
              "serve": {
                "listen": "127.0.0.1:\(http)", "dns": { "listen": "127.0.0.1:\(dns)" }, "otherTypes": "forward",
                "probeGuardedAddresses": true, "maxAnswers": \(maxAnswers)
              }
            }
            """
        }

        static func start() async throws -> Running {
            let dnsmasq = try await DNSMasq.start(
                records: TestZone.records + ["txt-record=txt.test,kept for its TTL", "local-ttl=60"], logsQueries: true)
            let (http, admin) = (try FreePort.tcp(), try FreePort.tcp())
            let dns = try FreePort.udpAndTCP()
            let settings = try TemporaryFiles.file(
                settingsText(dnsmasq: dnsmasq, http: http, dns: dns, maxAnswers: 4), name: "hostsctl.json")
            let (process, log) = try await ServeCommandTests.startServe(
                settings, port: http, log: "serve-control.log", adminPort: admin)
            return Running(
                dnsmasq: dnsmasq, process: process, log: log, settings: settings, http: http, dns: dns, admin: admin)
        }

        func stop() {
            process.stop()
            dnsmasq.stop()
        }

        /// `hostsctl control ARGUMENTS --admin` this server.
        func control(_ arguments: [String]) async throws -> HostsCTLProcess.Output {
            try await HostsCTLProcess.run(["control"] + arguments + ["--admin", "127.0.0.1:\(admin)"])
        }

        /// The status as the server's JSON.
        func status() async throws -> ServerStatus {
            let output = try await control(["status", "--json"])
            #expect(output.status == 0, "\(output.standardError)")
            return try JSONDecoder().decode(ServerStatus.self, from: Data(output.standardOutput.utf8))
        }

        /// kdig's answer for `name` of `type` over UDP.
        func kdig(_ name: String, type: String = "A") async throws -> String {
            let output = try await HostsCTLProcess.run(
                executable: "/usr/bin/kdig",
                ["@127.0.0.1", "-p", "\(dns)", "+notcp", "+timeout=10", "+retry=0", name, type])
            return output.standardOutput + output.standardError
        }

        /// The queries dnsmasq received for `name` (any type) once it has logged `count` of them in all.
        func queries(for name: String, waitingFor count: Int) async throws -> Int {
            for _ in 0..<50 {
                if dnsmasq.queriesSeen().count >= count { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            // The server asks in mixed case (DNS 0x20).
            return dnsmasq.queriesSeen().filter { $0.lowercased().contains(" \(name) ") }.count
        }
    }

    @Test(
        "status names the version, settings file, listeners and upstream health; a flush sends the next query upstream; a reload applies an edit or keeps the last good settings"
    )
    func statusFlushReload() async throws {
        let server = try await Running.start()
        defer { server.stop() }
        let first = try await server.status()
        #expect(first.version == HostsCTLVersion.current)
        #expect(first.settingsFile == server.settings)
        #expect(first.lastReload == nil)
        let listeners = Set(first.listeners.map { "\($0.kind) \($0.address)" })
        #expect(
            listeners == [
                "http 127.0.0.1:\(server.http)", "dns 127.0.0.1:\(server.dns)", "admin 127.0.0.1:\(server.admin)",
            ], "\(first.listeners)")
        #expect(
            first.upstreams.map(\.source) == ["cares", "relay"] && first.upstreams.allSatisfy { $0.state == "unknown" })

        // Asked twice: once upstream. Flushed: upstream again.
        #expect(try await server.kdig("n1.test").contains("10.1.0.1"))
        #expect(try await server.kdig("n1.test").contains("10.1.0.1"))
        #expect(try await server.queries(for: "n1.test", waitingFor: 1) == 1)
        let flushed = try await server.control(["flush", "n1.test"])
        #expect(
            flushed.status == 0 && flushed.standardOutput.contains("flushed n1.test: 1 from the cache"), "\(flushed)")
        #expect(try await server.kdig("n1.test").contains("10.1.0.1"))
        #expect(try await server.queries(for: "n1.test", waitingFor: 2) == 2)

        // A relayed type, kept, then flushed with its suffix.
        #expect(try await server.kdig("txt.test", type: "TXT").contains("NOERROR"))
        #expect(try await server.kdig("txt.test", type: "TXT").contains("NOERROR"))
        #expect(try await server.queries(for: "txt.test", waitingFor: 3) == 1)
        let suffix = try await server.control(["flush", "test", "--suffix"])
        #expect(suffix.status == 0 && suffix.standardOutput.contains("1 relayed answers"), "\(suffix)")
        #expect(try await server.kdig("txt.test", type: "TXT").contains("NOERROR"))
        #expect(try await server.queries(for: "txt.test", waitingFor: 4) == 2)

        let answered = try await server.status()
        let cares = try #require(answered.upstreams.first { $0.source == "cares" })
        #expect(cares.state == "up" && cares.answered == 2 && cares.failed == 0 && cares.lastAnswer != nil, "\(cares)")
        #expect(answered.upstreams.first { $0.source == "relay" }?.answered == 2)
        let text = try await server.control(["status"])
        #expect(
            text.standardOutput.contains("hostsctl serve \(HostsCTLVersion.current), up "), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("dns       127.0.0.1:\(server.dns)"), "\(text.standardOutput)")

        // An edit applied at once; a broken one refused, the last good settings in force.
        try Running.settingsText(dnsmasq: server.dnsmasq, http: server.http, dns: server.dns, maxAnswers: 2)
            .write(toFile: server.settings, atomically: true, encoding: .utf8)
        let applied = try await server.control(["reload"])
        #expect(applied.status == 0 && applied.standardOutput.contains("settings applied"), "\(applied)")
        #expect(
            try await server.status().lastReload.map { ($0.trigger, $0.applied) } ?? ("", false) == ("control", true))
        // The same file again (within the second: the command waits out the server's 429 and tries once more):
        // nothing rebuilt.
        let again = try await server.control(["reload"])
        #expect(again.status == 0 && again.standardOutput.contains("settings unchanged"), "\(again)")
        try "{ \"serve\": ".write(toFile: server.settings, atomically: true, encoding: .utf8)
        let refused = try await server.control(["reload"])
        #expect(refused.status == 1 && refused.standardError.contains("settings not applied"), "\(refused)")
        let last = try #require(try await server.status().lastReload)
        #expect(!last.applied && last.error != nil)
        #expect(try await server.kdig("n2.test").contains("10.1.0.2"), "still serving on the last good settings")

        // The upstream dies: after three failures in a row it is down.
        server.dnsmasq.freeze()
        for name in ["n3.test", "n4.test", "n5.test"] { _ = try await server.kdig(name) }
        let dead = try #require(try await server.status().upstreams.first { $0.source == "cares" })
        #expect(dead.state == "down" && dead.consecutiveFailures >= 3 && dead.lastFailure != nil, "\(dead)")
    }

    @Test(
        "control calls: POST only, refused from web pages (Origin, Sec-Fetch-Site) and for other Host names, absent from the public listener, bounded in rate"
    )
    func browsersRefused() async throws {
        let server = try await Running.start()
        defer { server.stop() }
        let admin = try await offThePool { try KeepAliveConnection(port: Int(server.admin)) }
        /// A call with `headers`, and the control header unless `control` is false.
        func call(_ target: String, method: String = "POST", _ headers: [String] = [], control: Bool = true)
            async throws -> (status: Int, headers: [String: String], body: String)
        {
            let all = headers + (control ? ["Hostsctl-Control: 1"] : [])
            return try await offThePool { try admin.exchange(target, method: method, headers: all) }
        }
        let flush = "/admin/flush?name=n1.test"
        #expect(try await call(flush, ["Origin: http://attacker.example"]).status == 403)
        #expect(try await call(flush, ["Origin: null"]).status == 403)
        #expect(try await call(flush, ["Sec-Fetch-Site: cross-site"]).status == 403)
        #expect(try await call(flush, ["Sec-Fetch-Site: same-origin"]).status == 403)
        #expect(try await call("/admin/reload", ["Origin: http://127.0.0.1:\(server.admin)"]).status == 403)
        let get = try await call(flush, method: "GET")
        #expect(get.status == 405 && get.headers["allow"] == "POST")
        #expect(try await call("/admin/reload", method: "GET").status == 405)
        #expect(try await call("/admin/status", method: "POST").status == 405)
        #expect(try await call(flush, ["Host: rebind.attacker.example"]).status == 421)
        #expect(try await call(flush, control: false).status == 403, "a POST without the control header")
        #expect(try await call("/admin/status", method: "GET", ["Sec-Fetch-Site: cross-site"]).status == 403)
        #expect(try await call("/stats.json/", method: "GET", ["Sec-Fetch-Site: cross-site"]).status == 403)
        #expect(try await call("/admin/status", method: "GET", ["Sec-Fetch-Site: same-origin"]).status == 200)
        #expect(try await call(flush, ["Sec-Fetch-Site: none"]).status == 200)
        #expect(try await call(flush).status == 200)
        #expect(try await call("/admin/flush").status == 400)
        #expect(try await call("/admin/flush?name=bad..name").status == 400)
        let publicListener = try await offThePool { try KeepAliveConnection(port: Int(server.http)) }
        let outside = try await offThePool {
            try publicListener.exchange(flush, method: "POST", headers: ["Hostsctl-Control: 1"])
        }
        #expect(outside.status == 404)
        // At most ten flushes a second: forty in a row meet the bound, told when to come back.
        var statuses: [Int] = []
        for _ in 0..<40 { statuses.append(try await call(flush).status) }
        #expect(statuses.contains(429), "\(statuses)")
    }

    @Test("hostsctl control: one clear line and exit 1 when no server answers; a bad name is a usage error")
    func unreachable() async throws {
        let port = try FreePort.tcp()
        let output = try await HostsCTLProcess.run(["control", "status", "--admin", "127.0.0.1:\(port)"])
        #expect(output.status == 1)
        #expect(output.standardError.contains("cannot reach 127.0.0.1:\(port): connection refused"), "\(output)")
        let bad = try await HostsCTLProcess.run(["control", "flush", "bad..name", "--admin", "127.0.0.1:\(port)"])
        #expect(bad.status == 64, "\(bad)")
        let noPort = try await HostsCTLProcess.run(["control", "status", "--admin", "127.0.0.1"])
        #expect(noPort.status == 64, "\(noPort)")
    }

    @Test("the control budget: one reload a second, ten flushes and ten status calls a second, each its own bucket")
    func budget() {
        var budget = ControlBudget()
        let start = ContinuousClock.now
        var reloads: [Bool] = []
        for offset in [0, 500, 1100] { reloads.append(budget.reloads.take(now: start + .milliseconds(offset))) }
        #expect(reloads == [true, false, true])
        var flushes: [Bool] = []
        for offset in [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 150, 150] {
            flushes.append(budget.flushes.take(now: start + .milliseconds(offset)))
        }
        #expect(flushes == Array(repeating: true, count: 10) + [false, true, false])
        let status = budget.status.take(now: start)
        #expect(status, "each kind of call has its own bucket")
    }
}
