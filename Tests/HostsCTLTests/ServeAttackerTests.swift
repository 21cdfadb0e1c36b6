import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSServer
@testable import HTTPDNSSettings
@testable import HostsCTLCommands

/// `hostsctl serve` as a real process, against what an attacker on the internet would try next (the second wave):
/// each test drives one pattern over real sockets and checks the bound the README states.
@Suite("hostsctl serve against attackers")
struct ServeAttackerTests {
    /// A settings file for `hostsctl serve` on `port` (HTTP) and `dnsPort` (plain DNS over UDP and TCP) with
    /// `served.test` at 127.0.0.88, and `extra` inside the `serve` object (`dnsExtra` inside `serve.dns`).
    static func settings(port: UInt16, dnsPort: UInt16, extra: String = "", dnsExtra: String = "") throws -> String {
        let overrides = try TemporaryFiles.file("127.0.0.88 served.test\n", name: "hosts")
        return try TemporaryFiles.file(
            """
            {
              "sources": { "order": ["overrides"], "systemFallback": false },
              "overrides": { "file": "\(overrides)" }, "probe": { "enabled": false },
              "serve": { "listen": "127.0.0.1:\(port)", "dns": { "listen": "127.0.0.1:\(dnsPort)"\(dnsExtra) }\(extra) }
            }
            """, name: "hostsctl.json")
    }

    /// A DNS query for `name` (type A) with message ID `id`, padded with an EDNS option to `size` bytes when given.
    static func query(_ name: String, id: UInt16, size: Int? = nil) -> [UInt8] {
        var message: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xFF), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, size == nil ? 0 : 1]
        for label in name.split(separator: ".") {
            message.append(UInt8(label.utf8.count))
            message += Array(label.utf8)
        }
        message += [0, 0, 1, 0, 1]
        if let size {
            // OPT record with one padding option (RFC 7830) filling the message to `size` bytes.
            let padding = size - message.count - 11 - 4
            message += [0, 0, 41, 0x10, 0x00, 0, 0, 0, 0]
            message += [UInt8((padding + 4) >> 8), UInt8((padding + 4) & 0xFF), 0, 12]
            message += [UInt8(padding >> 8), UInt8(padding & 0xFF)]
            message += [UInt8](repeating: 0, count: padding)
        }
        return message
    }

    /// `message` with its two-byte length, as DNS over TCP sends it.
    static func framed(_ message: [UInt8]) -> [UInt8] {
        [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
    }

    @Test(
        "a TCP DNS client whose writes always end one byte into the next message does not make the server keep what it already answered"
    )
    func streamBufferBounded() async throws {
        let (port, dnsPort) = (try FreePort.tcp(), try FreePort.tcp())
        let (process, log) = try await ServeCommandTests.startServe(
            try Self.settings(port: port, dnsPort: dnsPort), port: port, log: "serve-stream.log")
        defer { process.stop() }
        let dnsUp = try await offThePool {
            FreePort.waitUntilAccepting(port: dnsPort, while: { process.isRunning })
        }
        #expect(dnsUp)
        // Warm up with a few ordinary queries, so the baseline holds the server's working set.
        let before = try await offThePool { () throws -> Int in
            let fd = try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: TestTiming.scaled(.seconds(15)))
            defer { close(fd) }
            let one = Self.framed(Self.query("served.test", id: 1))
            for _ in 0..<20 {
                _ = one.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(fd, &buffer, buffer.count, 0)
            }
            return ServeNonReaderTests.memory(of: process.pid).resident
        }
        // 128 MiB of maximal messages, each write ending one byte into the next message, while a reader drains the
        // answers (so back-pressure is not what bounds the server).
        let total = 128 << 20
        let sent = try await offThePool { () throws -> Int in
            let fd = try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: TestTiming.scaled(.seconds(30)))
            defer { close(fd) }
            let reader = Thread {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while recv(fd, &buffer, buffer.count, 0) > 0 {}
            }
            reader.start()
            let message = Self.framed(Self.query("served.test", id: 2, size: 65_535))
            let stream = message + message
            var sent = 0
            var offset = 0
            // Each write: the rest of the message in progress and the first byte of the next one.
            while sent < total {
                let chunk = Array(stream[offset..<message.count + 1])
                let written = chunk.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written == chunk.count else { break }
                sent += written
                offset = 1
            }
            shutdown(fd, Int32(SHUT_WR))
            return sent
        }
        let after = ServeNonReaderTests.memory(of: process.pid)
        let growth = after.peak - before
        print("hostsctl serve, TCP DNS split writes: +\(growth >> 20) MiB peak resident for \(sent >> 20) MiB sent")
        #expect(sent >= total, "the server kept reading: \(sent >> 20) MiB went in")
        #expect(growth < 64 << 20, "the server grew by \(growth >> 20) MiB for \(sent >> 20) MiB sent")
        #expect(process.isRunning, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    @Test(
        "a listener's own limit (serve.dns.maxConnections) holds its next connection back while HTTP accepts, and lets it in when one of its own closes; the admin listener answers with every public place taken"
    )
    func listenerLimitsAndAdmin() async throws {
        let (port, dnsPort, adminPort) = (try FreePort.tcp(), try FreePort.tcp(), try FreePort.tcp())
        let (process, log) = try await ServeCommandTests.startServe(
            try Self.settings(
                port: port, dnsPort: dnsPort,
                extra: #", "maxConnections": 3"#, dnsExtra: #", "maxConnections": 1"#),
            port: port, log: "serve-listener-limit.log", adminPort: adminPort)
        defer { process.stop() }
        // The DNS listener binds after the HTTP one that startServe waits for.
        #expect(try await offThePool { FreePort.waitUntilAccepting(port: dnsPort, while: { process.isRunning }) })
        let timeout = TestTiming.scaled(.seconds(15))
        @Sendable func askDNS(_ fd: Int32) -> Int {
            let query = Self.framed(Self.query("served.test", id: 7))
            _ = query.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            return max(recv(fd, &buffer, buffer.count, 0), 0)
        }
        // The probe that found the DNS listener accepting may still hold its one place, and a connection accepted in
        // the same burst as the probe is closed unanswered (by design): the first connection tries again then.
        var first: Int32 = -1
        var firstAnswer = 0
        for _ in 0..<20 where firstAnswer <= 12 {
            if first >= 0 { close(first) }
            first = try await offThePool { try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: timeout) }
            firstAnswer = try await offThePool { [first] in askDNS(first) }
            if firstAnswer <= 12 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(firstAnswer > 12)
        // The DNS listener is at its own limit of 1: a second DNS connection waits unanswered.
        let waiting = try await offThePool { try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: .seconds(1)) }
        defer { close(waiting) }
        let early = try await offThePool { askDNS(waiting) }
        #expect(
            early == 0,
            "answered past the listener's own limit; \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        // HTTP still has the shared limit's other places: two connections, both answered.
        var http: [KeepAliveConnection] = []
        for _ in 0..<2 {
            let connection = try await offThePool { try KeepAliveConnection(port: Int(port)) }
            #expect(try await offThePool { try connection.get("/healthz") }.status == 200)
            http.append(connection)
        }
        // Every public place is taken; the operator still reads /metrics on the admin listener.
        let admin = try await offThePool { try KeepAliveConnection(port: Int(adminPort)) }
        let scrape = try await offThePool { try admin.get("/metrics") }
        #expect(scrape.status == 200 && scrape.body.contains("httpdns_serve_connections_open 3"), "\(scrape.body)")
        // An HTTP connection closing does not let the DNS listener past its own limit...
        http.removeLast()
        try await Task.sleep(for: .milliseconds(300))
        let stillWaiting = try await offThePool { () -> Int in
            var buffer = [UInt8](repeating: 0, count: 4096)
            return max(recv(waiting, &buffer, buffer.count, Int32(MSG_DONTWAIT)), 0)
        }
        #expect(stillWaiting == 0, "the DNS listener accepted past its own limit")
        // ...its own connection closing does: the waiting query is answered.
        close(first)
        let late = try await offThePool { () -> Int in
            var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
            setsockopt(waiting, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            return max(recv(waiting, &buffer, buffer.count, 0), 0)
        }
        #expect(late > 12, "TCP DNS answers once its own connection closed")
    }

    @Test(
        "at the shared connection limit every listener recovers, whichever listener's connection closes: TCP DNS answers after an HTTP connection closes"
    )
    func everyListenerRecovers() async throws {
        let (port, dnsPort) = (try FreePort.tcp(), try FreePort.tcp())
        let (process, log) = try await ServeCommandTests.startServe(
            try Self.settings(port: port, dnsPort: dnsPort, extra: #", "maxConnections": 4"#), port: port,
            log: "serve-limit.log")
        defer { process.stop() }
        let timeout = TestTiming.scaled(.seconds(15))
        /// One DNS query over TCP on `fd`; the answer's length, or 0 when none came within the socket's timeout.
        @Sendable func askDNS(_ fd: Int32) -> Int {
            let query = Self.framed(Self.query("served.test", id: 7))
            _ = query.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            return max(recv(fd, &buffer, buffer.count, 0), 0)
        }
        // Three HTTP connections and one TCP DNS connection fill the limit; each is answered.
        var http: [KeepAliveConnection] = []
        for _ in 0..<3 {
            let connection = try await offThePool { try KeepAliveConnection(port: Int(port)) }
            #expect(try await offThePool { try connection.get("/healthz") }.status == 200)
            http.append(connection)
        }
        // Every HTTP connection busy (a request head on its way), and the DNS one starts another query right after
        // its answer: nobody idle gives way (ThirdWaveTests has the idle case).
        for connection in http { connection.startRequest() }
        try await Task.sleep(for: .milliseconds(200))
        let dns = try await offThePool { try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: timeout) }
        #expect(try await offThePool { askDNS(dns) } > 12)
        _ = [UInt8(0), 40].withUnsafeBytes { send(dns, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
        try await Task.sleep(for: .milliseconds(200))
        // A fifth connection, to DNS: the limit is reached, so it waits (or is closed) unanswered.
        let waiting = try await offThePool {
            try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: .seconds(1))
        }
        let early = try await offThePool { askDNS(waiting) }
        let serveLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(early == 0, "answered \(early) bytes past the limit; \(serveLog)")
        // An HTTP connection closes: the DNS listener accepts again (though its own connection stayed open), and the
        // waiting connection's query is answered.
        http.removeLast()
        let late = try await offThePool { () -> Int in
            var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
            setsockopt(waiting, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            return max(recv(waiting, &buffer, buffer.count, 0), 0)
        }
        #expect(late > 12, "TCP DNS answers once a connection of another listener closed")
        // Once every connection has closed, both listeners accept and answer.
        http.removeAll()
        close(dns)
        close(waiting)
        try await Task.sleep(for: .milliseconds(200))
        let last = try await offThePool { try KeepAliveConnection(port: Int(port)) }
        #expect(try await offThePool { try last.get("/healthz") }.status == 200)
        let fresh = try await offThePool { try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: timeout) }
        defer { close(fresh) }
        #expect(try await offThePool { askDNS(fresh) } > 12)
    }

    @Test("served answers never reach getaddrinfo: serve turns the system fallback off and drops a system layer")
    func noSystemResolver() async throws {
        let path = try TemporaryFiles.file(
            #"{ "sources": { "order": ["overrides", "system"], "systemFallback": true } }"#, name: "hostsctl.json")
        let file = SettingsLoading.load(path)
        let loaded = try file.get()
        let settings = loaded.resolver
        #expect(settings.systemFallback && settings.sources.contains(.system), "the file asks for both")
        let served = ServeCommand.served(settings, serve: try loaded.read(ServeSettings.section))
        #expect(!served.systemFallback)
        #expect(served.sources == [.overrides])
        // config show says so beside the keys.
        let shown = try await HostsCTLProcess.run(["config", "show", "--config", path])
        #expect(shown.standardOutput.contains("sources.systemFallback (serve)"), "\(shown.standardOutput)")
        #expect(shown.standardOutput.contains("always under hostsctl serve"), "\(shown.standardOutput)")
    }

    @Test(
        "a name holding terminal escape sequences, asked 64 times, never reaches hostsctl top's screen or the busiest names"
    )
    func escapesNeverReachTheTerminal() async throws {
        let (port, dnsPort, adminPort) = (try FreePort.tcp(), try FreePort.tcp(), try FreePort.tcp())
        let (process, _) = try await ServeCommandTests.startServe(
            try Self.settings(port: port, dnsPort: dnsPort), port: port, log: "serve-escapes.log", adminPort: adminPort)
        defer { process.stop() }
        #expect(try await offThePool { FreePort.waitUntilAccepting(port: dnsPort, while: { process.isRunning }) })
        // Window title, clear screen and colour: the bytes a hostile label carries to an operator's terminal.
        let hostile = "evil\u{1b}]0;owned\u{07}\u{1b}[2J\u{1b}[31m.test"
        var stream: [UInt8] = []
        for id in 0..<64 { stream += Self.framed(Self.query(hostile, id: UInt16(id))) }
        for id in 64..<96 { stream += Self.framed(Self.query("served.test", id: UInt16(id))) }
        let fd = try await offThePool { try LoopbackTCP.connect(port: Int(dnsPort), receiveTimeout: .seconds(5)) }
        defer { close(fd) }
        _ = stream.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // Until the 96 answers are read (the hostile name's are NXDOMAIN or REFUSED; what matters is the screen).
        _ = try await offThePool { () -> Int in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var total = 0
            while total < 96 * 12 {
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                total += count
            }
            return total
        }
        let top = try await HostsCTLProcess.run(["top", "--admin", "127.0.0.1:\(adminPort)", "--count", "1", "--plain"])
        #expect(top.status == 0, "\(top.standardError)")
        #expect(
            !top.standardOutput.utf8.contains(0x1B) && !top.standardOutput.utf8.contains(0x07), "\(top.standardOutput)")
        #expect(top.standardOutput.contains("served.test"), "\(top.standardOutput)")
        #expect(!top.standardOutput.contains("owned"), "the hostile name is not recorded at all")
    }
}
