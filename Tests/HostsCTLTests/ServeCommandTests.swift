import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// `hostsctl serve` as a real process: the settings file's pipeline answered over DoH, a graceful stop on SIGTERM.
@Suite("hostsctl serve")
struct ServeCommandTests {
    /// Starts `hostsctl serve --config settings` and waits until it accepts on `port`; its output goes to the log
    /// named `log`, returned with it. The admin listener (`/metrics`) goes to `adminPort` on 127.0.0.1, by default
    /// a free one (the default port, 8054, would be shared by the suite's servers).
    static func startServe(
        _ settings: String, port: UInt16, log name: String = "serve.log", adminPort: UInt16? = nil,
        environment: [String: String] = [:]
    ) async throws -> (ChildProcess, String) {
        let log = TemporaryFiles.path(name)
        let admin = try adminPort ?? FreePort.tcp()
        let process = try ChildProcess(
            path: HostsCTLProcess.executable, arguments: ["serve", "--config", settings], logPath: log,
            environment: environment.merging(["HOSTSCTL_SERVE_ADMIN_LISTEN": "127.0.0.1:\(admin)"]) { $1 })
        let up = try await offThePool { FreePort.waitUntilAccepting(port: port, while: { process.isRunning }) }
        #expect(up, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        return (process, log)
    }

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
        let (process, log) = try await Self.startServe(settings, port: port, log: "serve.log")
        defer { process.stop() }
        let transport = try HTTPDNSTransport(
            configuration: .init(
                requestTimeout: TestTiming.scaled(.seconds(15)), connectTimeout: TestTiming.scaled(.seconds(10))))
        let client = try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .post),
                endpoints: [try HTTPDNSEndpoint("http://127.0.0.1:\(port)/dns-query")], allowNonPublicAddresses: true),
            transport: transport)
        let answer = try await client.resolve("served.test", family: .ipv4)
        #expect(answer.addresses.map(\.ip.description) == ["127.0.0.88"])
        await #expect(throws: HTTPDNSError.self) { try await client.resolve("other.test", family: .ipv4) }
        await transport.shutdown()
        kill(process.pid, SIGTERM)
        let status = try await offThePool { process.wait() }
        #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    @Test("what a client network reported outlives a restart beside the cache file, and cache show --network lists it")
    func networkScoresPersist() async throws {
        let port = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("192.0.2.1 steer.test\n192.0.2.2 steer.test\n", name: "hosts")
        let cache = TemporaryFiles.path("cache.json")
        let settings = try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides", "cache"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" },
              "cache": { "path": "\(cache)" },
              "probe": { "enabled": false },
              "serve": { "listen": "127.0.0.1:\(port)", "clientReports": true, "reportNetworks": ["127.0.0.0/8"] }
            }
            """, name: "hostsctl.json")
        func serve(_ body: () async throws -> Void) async throws {
            let (process, log) = try await Self.startServe(settings, port: port, log: "serve.log")
            defer { process.stop() }
            try await body()
            kill(process.pid, SIGTERM)
            let status = try await offThePool { process.wait() }
            #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        func curl(_ arguments: [String]) async throws -> String {
            let log = TemporaryFiles.path("curl.log")
            let process = try ChildProcess(
                path: "/usr/bin/curl", arguments: ["-s", "--max-time", "20"] + arguments, logPath: log)
            _ = try await offThePool { process.wait() }
            return (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        }
        let resolve = "http://127.0.0.1:\(port)/resolve?name=steer.test&type=A"
        func first() async throws -> String? {
            let text = try await curl([resolve])
            return text.range(of: #""data":""#).map { String(text[$0.upperBound...].prefix { $0 != "\"" }) }
        }
        try await serve {
            #expect(try await first() == "192.0.2.1")
            let report = #"{"host":"steer.test","ip":"192.0.2.2","connectMs":3}"#
            _ = try await curl(["-X", "POST", "--data", report, "http://127.0.0.1:\(port)/report"])
            #expect(try await first() == "192.0.2.2", "this network's report moves its own order")
        }
        let shown = try await HostsCTLProcess.run(
            ["cache", "show", "--network", "all", "--cache-file", cache, "--config", settings])
        #expect(shown.standardOutput.contains("steer.test  127.0.0.0/24"), "\(shown.standardOutput)")
        #expect(shown.standardOutput.contains("192.0.2.2  3.0 ms"), "\(shown.standardOutput)")
        let other = try await HostsCTLProcess.run(
            ["cache", "show", "--network", "198.51.100.0/24", "--cache-file", cache, "--config", settings])
        #expect(other.standardOutput.contains("no scores for 198.51.100.0/24"), "\(other.standardOutput)")
        // Restarted: the saved scores are back, so this network's order is still its own.
        try await serve {
            let top = try await first()
            #expect(top == "192.0.2.2", "the network's scores came back with the cache")
        }
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

/// `hostsctl serve` as a process an attacker meets: its memory while one client pipelines without reading.
@Suite("hostsctl serve under a non-reading client")
struct ServeNonReaderTests {
    /// The process's resident set and its peak so far, in bytes (/proc/PID/status).
    static func memory(of pid: pid_t) -> (resident: Int, peak: Int) {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first { Int($0) != nil } ?? "") ?? 0) * 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    @Test("a client that pipelines GET /metrics for 5 s and never reads grows the server by less than 64 MiB")
    func boundedMemory() async throws {
        let port = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("127.0.0.88 served.test\n", name: "hosts")
        let settings = try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" }, "probe": { "enabled": false },
              "serve": { "listen": "127.0.0.1:\(port)", "writeTimeoutMs": 60000 }
            }
            """, name: "hostsctl.json")
        // /metrics is on the admin listener; its connections have the same deadlines and bounds.
        let adminPort = try FreePort.tcp()
        let (process, _) = try await ServeCommandTests.startServe(
            settings, port: port, log: "serve-nonreader.log", adminPort: adminPort)
        defer { process.stop() }
        // Warm up: a few requests of every kind, so the baseline holds the server's working set.
        let warm = try await offThePool { try KeepAliveConnection(port: Int(adminPort)) }
        for _ in 0..<50 { _ = try await offThePool { try warm.get("/metrics") } }
        let before = Self.memory(of: process.pid)
        let flood = Task.detached { () throws -> Int in
            let fd = try LoopbackTCP.connect(
                port: Int(adminPort), receiveTimeout: .seconds(1), receiveBuffer: 4096,
                sendTimeout: .milliseconds(100))
            defer { close(fd) }
            let request = Array(String(repeating: "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", count: 200).utf8)
            var sent = 0
            let started = ContinuousClock.now
            while ContinuousClock.now - started < .seconds(5) {
                let written = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written > 0 { sent += written }
                if written < 0, errno == EPIPE || errno == ECONNRESET { break }
            }
            return sent
        }
        // Meanwhile another client is answered.
        try await Task.sleep(for: .seconds(1))
        let other = try await offThePool { try KeepAliveConnection(port: Int(port)) }
        let answer = try await offThePool { try other.get("/resolve?name=served.test") }
        #expect(answer.status == 200 && answer.body.contains("127.0.0.88"))
        let sent = try await flood.value
        let after = Self.memory(of: process.pid)
        let growth = after.peak - before.resident
        print(
            "hostsctl serve under a non-reading client: +\(growth >> 10) KiB peak resident, \(sent >> 10) KiB read from it"
        )
        #expect(growth < 64 << 20, "the server grew by \(growth >> 20) MiB; the client sent \(sent >> 10) KiB")
        #expect(sent < 16 << 20, "the server stopped reading from the client: \(sent >> 10) KiB went in")
    }
}

/// One keep-alive HTTP/1.1 connection to 127.0.0.1 (blocking; run it off the cooperative pool).
final class KeepAliveConnection: Sendable {
    private let fd: Int32

    init(port: Int) throws {
        fd = try LoopbackTCP.connect(port: port, receiveTimeout: TestTiming.scaled(.seconds(15)))
    }

    deinit { close(fd) }

    /// Starts a request head and leaves it unfinished: the connection is busy (a request in progress), so the
    /// server never sheds it to make room for a newcomer.
    func startRequest() {
        let partial = Array("GET /healthz HTTP/1.1\r\n".utf8)
        _ = partial.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends `GET target` and returns the status and body; throws when the server closed the connection.
    func get(_ target: String) throws -> (status: Int, body: String) {
        let response = try exchange(target)
        return (response.status, response.body)
    }

    /// Sends `method target` with `headers` (`Name: value` lines; `Host: 127.0.0.1` unless one is given) and returns
    /// the status, the head's header lines (names in lower case) and the body.
    func exchange(_ target: String, method: String = "GET", headers extra: [String] = []) throws -> (
        status: Int, headers: [String: String], body: String
    ) {
        let host = extra.contains { $0.lowercased().hasPrefix("host:") } ? [] : ["Host: 127.0.0.1"]
        let lines = ["\(method) \(target) HTTP/1.1"] + host + extra + (method == "POST" ? ["Content-Length: 0"] : [])
        let request = Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count
        else {
            throw TestServerError("send failed: the connection is gone")
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let head = text[..<end.lowerBound].lowercased()
                let length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                let bodyStart = text.utf8.distance(from: text.startIndex, to: end.upperBound)
                if received.count >= bodyStart + length {
                    let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                    let original = text[..<end.lowerBound]
                    var headers: [String: String] = [:]
                    for line in original.split(separator: "\r\n").dropFirst() {
                        guard let colon = line.firstIndex(of: ":") else { continue }
                        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                            .trimmingCharacters(in: .whitespaces)
                    }
                    return (
                        status, headers, String(decoding: received[bodyStart..<bodyStart + length], as: UTF8.self)
                    )
                }
            }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { throw TestServerError("the server closed the connection") }
            received += buffer[0..<count]
        }
    }
}

@Suite("hostsctl serve while running")
struct ServeReloadTests {
    @Test(
        "an edited settings file and overrides file are applied while serving, on a connection that stays open; /metrics answers"
    )
    func reloadWhileServing() async throws {
        let port = try FreePort.tcp()
        let overrides = try TemporaryFiles.file("127.0.0.88 served.test\n", name: "hosts")
        func settingsText(accounts: String) -> String {
            """
            {
              "sources": { "order": ["overrides"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" },
              "reload": { "intervalMs": 100 },
              "serve": { "listen": "127.0.0.1:\(port)", "accounts": \(accounts) }
            }
            """
        }
        let settings = try TemporaryFiles.file(settingsText(accounts: "[]"), name: "hostsctl.json")
        let adminPort = try FreePort.tcp()
        let (process, log) = try await ServeCommandTests.startServe(
            settings, port: port, log: "serve.log", adminPort: adminPort)
        defer { process.stop() }
        let connection = try await offThePool { try KeepAliveConnection(port: Int(port)) }
        let before = try await offThePool { try connection.get("/acct1/d?host=served.test") }
        #expect(before.status == 403 && before.body.contains("InvalidSignature"))
        // Edit both files; the running server picks them up within a few reload intervals.
        try settingsText(accounts: #"["acct1"]"#).write(toFile: settings, atomically: true, encoding: .utf8)
        try "127.0.0.88 served.test\n127.0.0.89 added.test\n".write(
            toFile: overrides, atomically: true, encoding: .utf8)
        var after: (status: Int, body: String) = (0, "")
        let applied = try await waitUntil {
            after = (try? await offThePool { try connection.get("/acct1/d?host=added.test") }) ?? (0, "")
            return after.status == 200 && after.body.contains("127.0.0.89")
        }
        #expect(applied, "\(after)")
        // /metrics on the admin listener, never on the public one.
        #expect(try await offThePool { try connection.get("/metrics") }.status == 404)
        let admin = try await offThePool { try KeepAliveConnection(port: Int(adminPort)) }
        let metrics = try await offThePool { try admin.get("/metrics") }
        #expect(metrics.status == 200)
        #expect(metrics.body.contains(#"httpdns_serve_requests_total{endpoint="alibaba",status="200"}"#))
        kill(process.pid, SIGTERM)
        let status = try await offThePool { process.wait() }
        #expect(status == 0, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }
}
