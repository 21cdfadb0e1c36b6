import AsyncHTTPClient
import Foundation
import HTTPDNS
import HTTPDNSSettings
@testable import HTTPDNSURLProtocol
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing
import TestSupport
import HTTPDNSPinnedClients

/// The AsyncHTTPClient front end to end: HTTPDNSClient → engine → pinned transport → local servers on 127.0.0.x.
@Suite("AsyncHTTPClient front", .serialized)
struct HTTPDNSClientTests {
    /// A resolver with run-time overrides and a scored cache, a client on it, and the traces it reported.
    final class Fixture: Sendable {
        let overrides = HostOverrides()
        let resolver: HostResolver
        let client: HTTPDNSClient
        private let log = TraceLog()

        init(configure: (inout HTTPDNSClient.Configuration) -> Void = { _ in }) throws {
            resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
            var configuration = HTTPDNSClient.Configuration()
            // Generous, as in ProtocolFixture: live loopback servers must never miss it on a loaded machine.
            configuration.connectTimeout = TestTiming.scaled(.seconds(10))
            let log = self.log
            configuration.traceHandler = { log.append($0) }
            configure(&configuration)
            client = try HTTPDNSClient(resolver: resolver, configuration: configuration)
        }

        var traces: [RequestTrace] { log.all }

        func pin(_ host: String, to addresses: String...) throws {
            overrides.set(addresses.compactMap(IPAddress.init), for: try HostPattern(host))
        }

        /// Executes `request` and reads the whole body as text.
        func text(_ request: HTTPClientRequest, timeout: TimeAmount = .seconds(30)) async throws -> (Int, String) {
            let response = try await client.execute(request, timeout: timeout)
            let body = try await response.body.collect(upTo: 1 << 20)
            return (Int(response.status.code), String(buffer: body))
        }

        func shutdown() async {
            await client.shutdown()
            await resolver.shutdown()
        }
    }

    @Test("HTTPS pinned to the fastest IP keeps the Host header and SNI of the real host; mixed case stays pinned")
    func hostAndSNI() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(
            host: "127.0.0.6", tls: try certificates.leaf(for: "api.test"), handler: echo)
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.additionalTrustRoots = [certificates.caPath] }
            try fixture.pin("api.test", to: "127.0.0.6")
            let (status, body) = try await fixture.text(
                HTTPClientRequest(url: "https://api.test:\(server.port)/secure?x=1"))
            #expect(status == 200)
            #expect(body.hasPrefix("GET /secure host=api.test:\(server.port) sni=api.test ip=127.0.0.6 "))
            let (_, mixed) = try await fixture.text(HTTPClientRequest(url: "https://API.Test:\(server.port)/mixed"))
            #expect(mixed.hasPrefix("GET /mixed host=api.test:\(server.port) sni=api.test ip=127.0.0.6 "))
            #expect(try await waitUntil { fixture.traces.count == 2 })
            #expect(fixture.traces.first?.address == IPAddress("127.0.0.6"))
            #expect(fixture.traces.first?.bytes == body.utf8.count)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("over HTTP/2 a body that stalls after its head runs into the timeout; the deadline never goes on the wire")
    func http2StalledBody() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.stalledAfterHead = ["stall.test"]
        let server = try await LocalHTTP2DoHServer(
            certificate: try certificates.leaf(for: "doh.test"), behaviour: behaviour)
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.additionalTrustRoots = [certificates.caPath] }
            try fixture.pin("doh.test", to: "127.0.0.1")
            /// An RFC 8484 GET for `name` (A, ID 0, RD).
            func get(_ name: String) -> HTTPClientRequest {
                var query: [UInt8] = [0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]
                for label in name.split(separator: ".") { query += [UInt8(label.utf8.count)] + Array(label.utf8) }
                query += [0, 0, 1, 0, 1]
                let encoded = Data(query).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
                return HTTPClientRequest(url: "https://doh.test:\(server.port)/dns-query?dns=\(encoded)")
            }
            let answered = try await fixture.client.execute(get("fine.test"), timeout: .seconds(10))
            #expect(answered.status == .ok)
            #expect(answered.version.major == 2)
            _ = try await answered.body.collect(upTo: 1 << 16)
            let started = ContinuousClock.now
            // Scaled for sanitizer runs, where the whole suite shares the loops: the head must arrive in time.
            let stalled = try await fixture.client.execute(
                get("stall.test"), timeout: TimeAmount(TestTiming.scaled(.seconds(1))))
            #expect(stalled.status == .ok)
            // Without the deadline the read would wait for ever: a watchdog cancels it (then `cancelled`) at 5 s.
            let reading = Task { try await stalled.body.collect(upTo: 1 << 16) }
            let watchdog = Task {
                try await Task.sleep(for: TestTiming.scaled(.seconds(5)))
                reading.cancel()
            }
            let late = await #expect(throws: HTTPDNSError.self) { _ = try await reading.value }
            watchdog.cancel()
            #expect(late?.code == .timeout)
            #expect(ContinuousClock.now - started < TestTiming.scaled(.seconds(5)))
            // The connection carries on for the next request: only the stalled stream was closed.
            let after = try await fixture.client.execute(get("after.test"), timeout: .seconds(10))
            #expect(after.status == .ok)
            _ = try await after.body.collect(upTo: 1 << 16)
            #expect(server.connections == 1)
            #expect(!server.requestHeaderNames.contains(ExchangeDeadline.header))
            #expect(server.requestHeaderNames.contains(":path"))
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a certificate for another name is rejected and never retried; a request's own TLS configuration is refused")
    func certificateChecks() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let wrong = try certificates.leaf(for: "other.test")
        let first = try await LocalHTTPServer(host: "127.0.0.12", tls: wrong, handler: echo)
        let second = try await LocalHTTPServer(host: "127.0.0.13", port: first.port, tls: wrong, handler: echo)
        try await withCleanup { () async throws in
            let fixture = try Fixture {
                $0.additionalTrustRoots = [certificates.caPath]
                $0.connectionAttemptDelay = .zero
            }
            try fixture.pin("api.test", to: "127.0.0.12", "127.0.0.13")
            let error = await #expect(throws: HTTPDNSError.self) {
                _ = try await fixture.client.execute(
                    HTTPClientRequest(url: "https://api.test:\(first.port)/"), timeout: .seconds(30))
            }
            #expect(error?.code == .certificateRejected)
            #expect(first.connections + second.connections == 1)

            var own = HTTPClientRequest(url: "https://api.test:\(first.port)/")
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
            own.tlsConfiguration = tls
            let refused = await #expect(throws: HTTPDNSError.self) {
                _ = try await fixture.client.execute(own, timeout: .seconds(30))
            }
            #expect(refused?.code == .invalidRequest)
            #expect(first.connections + second.connections == 1)
            await fixture.shutdown()
        } cleanup: {
            await first.stop(); await second.stop()
        }
    }

    @Test(
        "redirects are followed with each hop resolved again; credentials do not cross origins; https to http is refused"
    )
    func redirects() async throws {
        let second = try await LocalHTTPServer(host: "127.0.0.8", handler: echo)
        let secondPort = second.port
        let first = try await LocalHTTPServer(host: "127.0.0.7") { request in
            switch request.path {
            case "/start": .redirect(to: "http://b.test:\(secondPort)/final")
            case "/post": .redirect(to: "/landing", status: 303)
            case "/landing": .text("landing \(request.method) \(request.body.count)")
            default: .text("unexpected", status: 500)
            }
        }
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let secure = try await LocalHTTPServer(host: "127.0.0.9", tls: try certificates.leaf(for: "s.test")) { _ in
            .redirect(to: "http://b.test:\(secondPort)/plain")
        }
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.additionalTrustRoots = [certificates.caPath] }
            try fixture.pin("a.test", to: "127.0.0.7")
            try fixture.pin("b.test", to: "127.0.0.8")
            try fixture.pin("s.test", to: "127.0.0.9")
            var request = HTTPClientRequest(url: "http://a.test:\(first.port)/start")
            request.headers.add(name: "Authorization", value: "Bearer secret")
            let (status, body) = try await fixture.text(request)
            #expect(status == 200)
            #expect(body == "GET /final host=b.test:\(secondPort) sni=- ip=127.0.0.8 cookie=- auth=- tag=- body=0")
            #expect(try await waitUntil { fixture.traces.count == 1 })
            #expect(fixture.traces.first?.hops.map(\.address) == [IPAddress("127.0.0.7"), IPAddress("127.0.0.8")])
            #expect(fixture.traces.first?.hops.map(\.status) == [302, 200])

            // 303 turns a POST into a GET without its body.
            var post = HTTPClientRequest(url: "http://a.test:\(first.port)/post")
            post.method = .POST
            post.body = .bytes(ByteBuffer(string: "amount=100"))
            post.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            #expect(try await fixture.text(post).1 == "landing GET 0")

            let error = await #expect(throws: HTTPDNSError.self) {
                _ = try await fixture.client.execute(
                    HTTPClientRequest(url: "https://s.test:\(secure.port)/"), timeout: .seconds(30))
            }
            #expect(error?.code == .insecureRedirect)
            await fixture.shutdown()
        } cleanup: {
            await first.stop(); await second.stop(); await secure.stop()
        }
    }

    @Test(
        "failover: a refused address is skipped for the next one and the scores learn it; a reset POST is not sent twice"
    )
    func failover() async throws {
        let live = try await LocalHTTPServer(host: "127.0.0.11", handler: echo)
        let reached = EventLog()
        let resetting = try await LocalHTTPServer(host: "127.0.0.44") { request in
            reached.add("first \(request.method) \(request.body.count)")
            return .reset
        }
        let other = try await LocalHTTPServer(host: "127.0.0.45", port: resetting.port) { request in
            reached.add("second \(request.method) \(request.body.count)")
            return .reset
        }
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.connectionAttemptDelay = .zero }
            try fixture.pin("fo.test", to: "127.0.0.10", "127.0.0.11")
            // The first address has nothing listening on the port: it refuses.
            let port = live.port
            let (status, body) = try await fixture.text(HTTPClientRequest(url: "http://fo.test:\(port)/"))
            #expect(status == 200)
            #expect(body.contains("ip=127.0.0.11"))
            #expect(try await waitUntil { fixture.traces.count == 1 })
            let hop = try #require(fixture.traces.first?.hops.first)
            #expect(hop.failedAttempts.map(\.address) == [IPAddress("127.0.0.10")])
            #expect(hop.failedAttempts.first?.error.code == .connectionFailed)
            // The scores learned it: the next request goes straight to the live address.
            _ = try await fixture.text(HTTPClientRequest(url: "http://fo.test:\(port)/again"))
            #expect(try await waitUntil { fixture.traces.count == 2 })
            #expect(fixture.traces.last?.hops.first?.failedAttempts.isEmpty == true)
            #expect(fixture.traces.last?.address == IPAddress("127.0.0.11"))

            try fixture.pin("orders.test", to: "127.0.0.44", "127.0.0.45")
            var post = HTTPClientRequest(url: "http://orders.test:\(resetting.port)/charge")
            post.method = .POST
            post.body = .bytes(ByteBuffer(string: "amount=100"))
            let error = await #expect(throws: HTTPDNSError.self) {
                _ = try await fixture.client.execute(post, timeout: .seconds(30))
            }
            #expect(reached.all == ["first POST 10"])
            #expect(error?.message.contains("not sent again") == true)
            await fixture.shutdown()
        } cleanup: {
            await live.stop(); await resetting.stop(); await other.stop()
        }
    }

    @Test("a 50 MB body streams in parts as it arrives, never buffered whole")
    func streamedBody() async throws {
        let size = 50 << 20
        let payload = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        let server = try await LocalHTTPServer(host: "127.0.0.5") { _ in
            .respond(status: 200, contentType: "application/octet-stream", body: payload)
        }
        try await withCleanup { () async throws in
            let fixture = try Fixture()
            try fixture.pin("big.test", to: "127.0.0.5")
            let response = try await fixture.client.execute(
                HTTPClientRequest(url: "http://big.test:\(server.port)/big"), timeout: .seconds(120))
            #expect(response.headers.first(name: "Content-Length") == "\(size)")
            var total = 0
            var parts = 0
            var largest = 0
            for try await part in response.body {
                total += part.readableBytes
                parts += 1
                largest = max(largest, part.readableBytes)
            }
            #expect(total == size)
            #expect(parts > 50)
            #expect(largest < 4 << 20)
            #expect(try await waitUntil { fixture.traces.count == 1 })
            #expect(fixture.traces.first?.bytes == size)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("one keep-alive connection holds each exchange to its own deadline, later or earlier than the one before")
    func deadlinesOnOneConnection() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            switch request.path {
            case "/drip": .drip(bytes: 8, every: TestTiming.scaled(.milliseconds(200)))
            case "/stall": .stall
            default: .text("fine")
            }
        }
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.maximumConnectionsPerHost = 1 }
            try fixture.pin("d.test", to: "127.0.0.5")
            let base = "http://d.test:\(server.port)"
            // A short deadline first: the connection's timer is armed for it and outlives the exchange. It and the
            // drip below scale together (a sanitized run is slower), so the drip always outlasts it.
            let (status, text) = try await fixture.text(
                HTTPClientRequest(url: "\(base)/fine"), timeout: TimeAmount(TestTiming.scaled(.seconds(1))))
            #expect(status == 200 && text == "fine")
            // The next exchange has a later deadline and a body that outlasts the first one's: the timer fires in the
            // middle of it and must be armed again, not end it.
            let (dripStatus, dripped) = try await fixture.text(
                HTTPClientRequest(url: "\(base)/drip"), timeout: TimeAmount(TestTiming.scaled(.seconds(30))))
            #expect(dripStatus == 200 && dripped == "........")
            #expect(server.connections == 1, "both exchanges went over one connection")
            // Then an earlier deadline than the armed one (the drip's): a stalled body ends at its own.
            let started = ContinuousClock.now
            let stalled = try await fixture.client.execute(
                HTTPClientRequest(url: "\(base)/stall"), timeout: TimeAmount(TestTiming.scaled(.seconds(1))))
            let late = await #expect(throws: HTTPDNSError.self) {
                _ = try await stalled.body.collect(upTo: 1 << 20)
            }
            #expect(late?.code == .timeout)
            #expect(ContinuousClock.now - started < TestTiming.scaled(.seconds(10)))
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("the timeout covers a stalled answer; a dropped body gives its connection back; cancellation ends a request")
    func timeoutsAndRelease() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            switch request.path {
            case "/stall": .stall
            case "/hold": .delayed(.seconds(30), .text("late"))
            case "/headers": .text(request.headers.keys.map { $0.lowercased() }.sorted().joined(separator: ","))
            default: .text(String(repeating: "y", count: 100_000))
            }
        }
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.maximumConnectionsPerHost = 1 }
            try fixture.pin("t.test", to: "127.0.0.5")
            let port = server.port
            // A stalled body runs into the request's timeout while it is read (the head must come within it, which
            // a loaded sanitized run once missed by more than 1 s: the timeout scales).
            let stallTimeout = TimeAmount(TestTiming.scaled(.seconds(1)))
            let stalled = try await fixture.client.execute(
                HTTPClientRequest(url: "http://t.test:\(port)/stall"), timeout: stallTimeout)
            let late = await #expect(throws: HTTPDNSError.self) {
                _ = try await stalled.body.collect(upTo: 1 << 20)
            }
            #expect(late?.code == .timeout)
            // The same with a request body.
            var post = HTTPClientRequest(url: "http://t.test:\(port)/stall")
            post.method = .POST
            post.body = .bytes(ByteBuffer(string: "payload"))
            let stalledPost = try await fixture.client.execute(post, timeout: stallTimeout)
            let latePost = await #expect(throws: HTTPDNSError.self) {
                _ = try await stalledPost.body.collect(upTo: 1 << 20)
            }
            #expect(latePost?.code == .timeout)
            // The deadline travels to the connection in a header that is taken off before the head is encoded.
            let (_, names) = try await fixture.text(
                HTTPClientRequest(url: "http://t.test:\(port)/headers"), timeout: .seconds(10))
            #expect(names.contains("host"))
            #expect(!names.contains(ExchangeDeadline.header))
            // A body dropped unread frees the only connection place: the next request is not stuck behind it.
            do {
                let dropped = try await fixture.client.execute(
                    HTTPClientRequest(url: "http://t.test:\(port)/big"), timeout: .seconds(30))
                #expect(dropped.status == .ok)
            }
            let (status, _) = try await fixture.text(
                HTTPClientRequest(url: "http://t.test:\(port)/next"), timeout: .seconds(10))
            #expect(status == 200)
            // Cancelling the task ends a request waiting for its answer.
            let client = fixture.client
            let held = Task {
                try await client.execute(HTTPClientRequest(url: "http://t.test:\(port)/hold"), timeout: .seconds(60))
            }
            try await Task.sleep(for: .milliseconds(200))
            held.cancel()
            let error = await #expect(throws: HTTPDNSError.self) { _ = try await held.value }
            #expect(error?.code == .cancelled)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test(
        "many requests at once through one client, some cancelled mid-flight and some dropped unread: all end, no place leaks"
    )
    func manyAtOnce() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            request.path.hasPrefix("/slow")
                ? .delayed(.milliseconds(50), .text(String(repeating: "s", count: 10_000)))
                : .text(String(repeating: "f", count: 10_000))
        }
        try await withCleanup { () async throws in
            let fixture = try Fixture { $0.maximumConnectionsPerHost = 4 }
            try fixture.pin("many.test", to: "127.0.0.5")
            let client = fixture.client
            let port = server.port
            let outcomes = try await withTimeLimit(.seconds(120)) {
                await withTaskGroup(of: String.self) { group in
                    for index in 0..<300 {
                        group.addTask {
                            let url = "http://many.test:\(port)/\(index.isMultiple(of: 3) ? "slow" : "fast")/\(index)"
                            let work = Task { () async throws -> String in
                                let response = try await client.execute(
                                    HTTPClientRequest(url: url), timeout: .seconds(60))
                                if index.isMultiple(of: 7) { return "dropped" }
                                let body = try await response.body.collect(upTo: 1 << 20)
                                return body.readableBytes == 10_000 ? "ok" : "short"
                            }
                            if index.isMultiple(of: 5) {
                                try? await Task.sleep(for: .milliseconds(index % 40))
                                work.cancel()
                            }
                            do { return try await work.value } catch let error as HTTPDNSError {
                                return error.code == .cancelled ? "cancelled" : "failed \(error)"
                            } catch {
                                return "failed \(error)"
                            }
                        }
                    }
                    return await group.reduce(into: [String]()) { $0.append($1) }
                }
            }
            #expect(outcomes.count == 300)
            #expect(outcomes.filter { $0.hasPrefix("failed") || $0 == "short" } == [])
            #expect(outcomes.filter { $0 == "ok" }.count >= 150)
            // Every place came back: a burst as large as the limit goes straight through.
            let after = try await withTimeLimit(.seconds(30)) {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for index in 0..<4 {
                        group.addTask {
                            try await fixture.text(
                                HTTPClientRequest(url: "http://many.test:\(port)/fast/after\(index)")
                            ).0
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
            }
            #expect(after == [200, 200, 200, 200])
            #expect(fixture.client.pinnedClientCount == 1)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a resolver built from settings lends one client pool to its HTTP DNS upstream and to the clients made on it")
    func oneSharedPool() async throws {
        let doh = try await LocalHTTPServer(handler: FakeHTTPDNS.dnsJSON())
        let app = try await LocalHTTPServer(host: "127.0.0.7", handler: echo)
        let files = try TemporaryFiles()
        try await withCleanup { () async throws in
            let path = try files.write(
                "hostsctl.json",
                """
                {
                  "sources": { "order": ["overrides", "cache", "httpdns"], "systemFallback": false },
                  "reload": { "intervalMs": 0 },
                  "probe": { "enabled": false },
                  "httpdns": {
                    "providers": ["json"],
                    "provider": { "json": { "api": "doh-json", "urls": ["\(doh.url)/resolve"] } }
                  }
                }
                """)
            let settings = try SettingsFile.load(path: path, environment: [:]).get().resolver
            let resolver = try HostResolver(configuration: settings, prober: nil, persistingCache: false)
            _ = try await resolver.resolve(try HostName("multi.test"), family: .ipv4)
            #expect(resolver.clientPool.clientCount() == 1, "HTTP DNS over HTTP/1.1 took its client from the pool")

            // Other client settings than HTTP DNS's (with the same ones the two would share clients too).
            var configuration = HTTPDNSClient.Configuration()
            configuration.connectTimeout = .seconds(3)
            let client = try HTTPDNSClient(resolver: resolver, configuration: configuration)
            resolver.overrides?.set([IPAddress("127.0.0.7")!], for: try HostPattern("app.test"))
            let response = try await client.execute(
                HTTPClientRequest(url: "http://app.test:\(app.port)/shared"), timeout: .seconds(30))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
            #expect(body.hasPrefix("GET /shared host=app.test:\(app.port) "))
            #expect(client.pinnedClientCount == 1)
            #expect(resolver.clientPool.clientCount() == 2, "one pool holds both users' clients")

            await client.shutdown()
            #expect(resolver.clientPool.clientCount() == 1, "the client's shutdown closes only its own clients")
            let more = try await resolver.resolve(try HostName("v4only.test"), family: .ipv4)
            #expect(more.addresses.map(\.ip) == [IPAddress("192.0.2.10")!], "HTTP DNS keeps working")
            await #expect(throws: HTTPDNSError.self) {
                _ = try await client.execute(
                    HTTPClientRequest(url: "http://app.test:\(app.port)/"), timeout: .seconds(5))
            }

            await resolver.shutdown()
            #expect(resolver.clientPool.clientCount() == 0)
        } cleanup: {
            await app.stop()
            await doh.stop()
            _ = files
        }
    }
}
