#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import HTTPDNS
@testable import HTTPDNSURLProtocol
import Synchronization
import Testing
import TestSupport
import HTTPDNSPinnedClients

/// The URL protocol end to end: URLSession → protocol → pinned transport → local servers on 127.0.0.x.
@Suite("URL protocol", .serialized)
struct URLProtocolTests {
    @Test("the server sees the original Host header and path; the app sees the original URL")
    func hostHeaderAndPath() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5", handler: echo)
        let fixture = try ProtocolFixture()
        try await withCleanup { () async throws in
            try fixture.pin("api.test", to: "127.0.0.5")
            let url = URL(string: "http://api.test:\(server.port)/hello?x=1")!
            let (data, response) = try await fixture.session.data(for: URLRequest(url: url))
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200)
            #expect(http.url == url)
            #expect(
                text(data) == "GET /hello host=api.test:\(server.port) sni=- ip=127.0.0.5 cookie=- auth=- tag=- body=0")
            let trace = try #require(fixture.traces.last)
            #expect(trace.hops.map(\.address) == [IPAddress("127.0.0.5")])
            #expect(trace.hops.first?.hostHeader == "api.test:\(server.port)")
            // Host names are case-insensitive: a mixed-case URL goes to the same pinned address, never to the
            // system resolver, and the server sees the name in lower case.
            let mixed = URL(string: "http://API.Test:\(server.port)/hello")!
            let (mixedData, _) = try await fixture.session.data(for: URLRequest(url: mixed))
            #expect(
                text(mixedData)
                    == "GET /hello host=api.test:\(server.port) sni=- ip=127.0.0.5 cookie=- auth=- tag=- body=0")
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("HTTPS pinned to an IP sends SNI and checks the certificate for the real host")
    func httpsWithRealHostName() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(
            host: "127.0.0.6", tls: try certificates.leaf(for: "api.test"), handler: echo)
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture { $0.connection.additionalTrustRoots = [certificates.caPath] }
            try fixture.pin("api.test", to: "127.0.0.6")
            let url = URL(string: "https://api.test:\(server.port)/secure")!
            let (data, response) = try await fixture.session.data(for: URLRequest(url: url))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(text(data).hasPrefix("GET /secure host=api.test:\(server.port) sni=api.test ip=127.0.0.6 "))
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a certificate for another name is rejected and never retried on another address")
    func certificateForAnotherName() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let wrong = try certificates.leaf(for: "other.test")
        let first = try await LocalHTTPServer(host: "127.0.0.12", tls: wrong, handler: echo)
        let second = try await LocalHTTPServer(host: "127.0.0.13", port: first.port, tls: wrong, handler: echo)
        try await withCleanup { () async throws in
            // No connection race, so the servers count only the exchange's own connections.
            let fixture = try ProtocolFixture {
                $0.connection.additionalTrustRoots = [certificates.caPath]
                $0.connection.connectionAttemptDelay = .zero
            }
            try fixture.pin("api.test", to: "127.0.0.12", "127.0.0.13")
            let url = URL(string: "https://api.test:\(first.port)/")!
            let error = await #expect(throws: URLError.self) {
                try await fixture.session.data(for: URLRequest(url: url))
            }
            #expect(error?.code == .serverCertificateUntrusted)
            #expect(error.flatMap { HTTPDNSError($0) }?.code == .certificateRejected)
            #expect(first.connections + second.connections == 1)
            await fixture.shutdown()
        } cleanup: {
            await first.stop(); await second.stop()
        }
    }

    @Test("a certificate from an untrusted CA is rejected: there is no way around verification")
    func untrustedCertificate() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(
            host: "127.0.0.6", tls: try certificates.leaf(for: "api.test"), handler: echo)
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.6")
            let url = URL(string: "https://api.test:\(server.port)/")!
            let error = await #expect(throws: URLError.self) {
                try await fixture.session.data(for: URLRequest(url: url))
            }
            #expect(error.flatMap { HTTPDNSError($0) }?.code == .certificateRejected)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a redirect chain across two hosts re-resolves each hop to its own IP")
    func redirectAcrossHosts() async throws {
        let second = try await LocalHTTPServer(host: "127.0.0.8", handler: echo)
        let secondPort = second.port
        let first = try await LocalHTTPServer(host: "127.0.0.7") { request in
            request.path == "/start"
                ? .redirect(to: "http://b.test:\(secondPort)/final") : .text("unexpected", status: 500)
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("a.test", to: "127.0.0.7")
            try fixture.pin("b.test", to: "127.0.0.8")
            var request = URLRequest(url: URL(string: "http://a.test:\(first.port)/start")!)
            request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
            let (data, response) = try await fixture.session.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200)
            #expect(http.url?.absoluteString == "http://b.test:\(secondPort)/final")
            // The second hop reached b.test's own IP with its own Host header; Authorization did not cross origins.
            #expect(
                text(data) == "GET /final host=b.test:\(secondPort) sni=- ip=127.0.0.8 cookie=- auth=- tag=- body=0")
            let trace = try #require(fixture.traces.last)
            #expect(trace.hops.map(\.address) == [IPAddress("127.0.0.7"), IPAddress("127.0.0.8")])
            #expect(trace.hops.map(\.status) == [302, 200])
            await fixture.shutdown()
        } cleanup: {
            await first.stop(); await second.stop()
        }
    }

    @Test(
        "redirect methods: 301/302 turn POST into GET, 303 anything into GET, 307/308 keep method and body",
        arguments: [
            (301, "POST", "GET /to body=0"), (302, "POST", "GET /to body=0"), (303, "PUT", "GET /to body=0"),
            (307, "POST", "POST /to body=5"), (308, "PUT", "PUT /to body=5"), (302, "PUT", "PUT /to body=5"),
        ])
    func redirectMethods(status: Int, method: String, expected: String) async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.7") { request in
            request.path == "/from"
                ? .redirect(to: "/to", status: status)
                : .text("\(request.method) \(request.path) body=\(request.body.count)")
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("a.test", to: "127.0.0.7")
            var request = URLRequest(url: URL(string: "http://a.test:\(server.port)/from")!)
            request.httpMethod = method
            request.httpBody = Data("hello".utf8)
            request.setValue("Bearer same-origin", forHTTPHeaderField: "Authorization")
            let (data, _) = try await fixture.session.data(for: request)
            #expect(text(data) == expected)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a redirect loop ends with tooManyRedirects; followRedirects false delivers the 3xx")
    func redirectLimitAndOptOut() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.7") { _ in .redirect(to: "/again") }
        try await withCleanup { () async throws in
            let looping = try ProtocolFixture { $0.connection.maximumRedirects = 3 }
            try looping.pin("a.test", to: "127.0.0.7")
            let url = URL(string: "http://a.test:\(server.port)/")!
            let error = await #expect(throws: URLError.self) {
                try await looping.session.data(for: URLRequest(url: url))
            }
            #expect(error?.code == .httpTooManyRedirects)
            #expect(looping.traces.last?.hops.count == 4)
            await looping.shutdown()

            let delivering = try ProtocolFixture { $0.connection.followRedirects = false }
            try delivering.pin("a.test", to: "127.0.0.7")
            let (_, response) = try await delivering.session.data(for: URLRequest(url: url))
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 302)
            #expect(http.value(forHTTPHeaderField: "Location") == "/again")
            await delivering.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("POST bodies from httpBody and from httpBodyStream arrive whole")
    func postBodies() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            .respond(status: 200, contentType: "application/octet-stream", body: request.body)
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            let payload = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let url = URL(string: "http://api.test:\(server.port)/upload")!
            var fromBody = URLRequest(url: url)
            fromBody.httpMethod = "POST"
            fromBody.httpBody = payload
            let (echoed, _) = try await fixture.session.data(for: fromBody)
            #expect(echoed == payload)
            var fromStream = URLRequest(url: url)
            fromStream.httpMethod = "POST"
            fromStream.httpBodyStream = InputStream(data: payload)
            let (streamed, _) = try await fixture.session.data(for: fromStream)
            #expect(streamed == payload)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a request body stream over the cap fails with a clear error")
    func requestBodyCap() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5", handler: echo)
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture { $0.maximumRequestBodyBytes = 1000 }
            try fixture.pin("api.test", to: "127.0.0.5")
            var request = URLRequest(url: URL(string: "http://api.test:\(server.port)/")!)
            request.httpMethod = "POST"
            request.httpBodyStream = InputStream(data: Data(count: 5000))
            let error = await #expect(throws: URLError.self) { try await fixture.session.data(for: request) }
            #expect(error.flatMap { HTTPDNSError($0) }?.code == .requestBodyTooLarge)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a 5 MB response arrives whole through completion handlers, async/await and delegates")
    func largeResponseEveryCallerStyle() async throws {
        let big = (0..<(5 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 13) }
        let server = try await LocalHTTPServer(host: "127.0.0.5") { _ in
            .respond(status: 200, contentType: "application/octet-stream", body: big)
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            let url = URL(string: "http://api.test:\(server.port)/big")!
            let expected = Data(big)

            let (asyncData, _) = try await fixture.session.data(for: URLRequest(url: url))
            #expect(asyncData == expected)

            let session = fixture.session
            let completionData: Data = try await withTimeLimit(.seconds(30)) {
                try await withCheckedThrowingContinuation { continuation in
                    session.dataTask(with: URLRequest(url: url)) { data, _, error in
                        if let error {
                            continuation.resume(throwing: error)
                        } else {
                            continuation.resume(returning: data ?? Data())
                        }
                    }.resume()
                }
            }
            #expect(completionData == expected)

            let collector = DataCollector()
            let delegateSession = URLSession(
                configuration: fixture.sessionConfiguration(), delegate: collector, delegateQueue: nil)
            delegateSession.dataTask(with: URLRequest(url: url)).resume()
            let (delegateData, delegateError) = try await withTimeLimit(.seconds(30)) { await collector.result() }
            #expect(delegateError == nil)
            #expect(delegateData == expected)
            delegateSession.finishTasksAndInvalidate()
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("failover: a refused address is skipped for the next one, and the cache learns it")
    func failoverFromClosedPort() async throws {
        let live = try await LocalHTTPServer(host: "127.0.0.11", handler: echo)
        try await withCleanup { () async throws in
            try await DNSMasq.with(records: ["host-record=fo.test,127.0.0.10,60", "host-record=fo.test,127.0.0.11,60"])
            { dns in
                let fixture = try ProtocolFixture(dnsServer: dns.address)
                let dead = try #require(IPAddress("127.0.0.10"))
                let alive = try #require(IPAddress("127.0.0.11"))
                let name = try HostName("fo.test")
                // Resolve once and make the dead address look best, so the first attempt goes to it.
                _ = try await fixture.resolver.resolveRanked("fo.test")
                fixture.resolver.reportConnect(to: dead, of: name, latency: .microseconds(1))
                fixture.resolver.reportConnect(to: alive, of: name, latency: .milliseconds(50))
                #expect(fixture.resolver.cache?.bestAddress(for: name) == dead)

                let (data, _) = try await fixture.session.data(
                    for: URLRequest(url: URL(string: "http://fo.test:\(live.port)/")!))
                #expect(text(data).contains("ip=127.0.0.11"))
                let hop = try #require(fixture.traces.last?.hops.first)
                #expect(hop.failedAttempts.map(\.address) == [dead])
                #expect(hop.failedAttempts.first?.error.code == .connectionFailed)
                #expect(hop.address == alive)
                #expect(fixture.resolver.cache?.bestAddress(for: name) == alive)
                await fixture.shutdown()
            }
        } cleanup: {
            await live.stop()
        }
    }

    @Test("a POST whose connection is reset after the server read it is never sent to another address; a GET is")
    func noReplayOfPost() async throws {
        let reached = EventLog()
        let first = try await LocalHTTPServer(host: "127.0.0.44") { request in
            reached.add("first \(request.method) \(request.body.count)")
            return .reset
        }
        try await withCleanup { () async throws in
            let second = try await LocalHTTPServer(host: "127.0.0.45", port: first.port) { request in
                reached.add("second \(request.method) \(request.body.count)")
                return .reset
            }
            try await withCleanup { () async throws in
                // Not raced: under load the second address could win a race before the first connects, and this
                // test is about which address hears the POST after a reset, so the ranked order must hold.
                let fixture = try ProtocolFixture { $0.connection.connectionAttemptDelay = .zero }
                try fixture.pin("orders.test", to: "127.0.0.44", "127.0.0.45")
                var post = URLRequest(url: URL(string: "http://orders.test:\(first.port)/charge")!)
                post.httpMethod = "POST"
                post.httpBody = Data("amount=100".utf8)
                await #expect(throws: (any Error).self) { _ = try await fixture.session.data(for: post) }
                #expect(reached.all == ["first POST 10"])
                let trace = try #require(fixture.traces.last)
                #expect(trace.error?.code == .connectionFailed || trace.error?.code == .connectionLost)
                #expect(trace.error?.message.contains("not sent again") == true)
                #expect(trace.hops.first?.failedAttempts.count == 1)

                // An idempotent method may go on to the next address after the same failure.
                reached.reset()
                await #expect(throws: (any Error).self) {
                    _ = try await fixture.session.data(
                        for: URLRequest(url: URL(string: "http://orders.test:\(first.port)/status")!))
                }
                // (The first address failed just now, so it backs off and the GET starts on the second.)
                #expect(reached.all.sorted() == ["first GET 0", "second GET 0"])
                await fixture.shutdown()
            } cleanup: {
                await second.stop()
            }
        } cleanup: {
            await first.stop()
        }
    }

    @Test(
        "a blackholed best address loses a connection race instead of costing a connect timeout; the next request goes straight to the winner"
    )
    func connectionRace() async throws {
        let live = try await LocalHTTPServer(host: "127.0.0.62", handler: echo)
        try await withCleanup { () async throws in
            let blackhole = try BlackholeListener(ip: "127.0.0.63", port: UInt16(live.port))
            defer { blackhole.close() }
            // The live address wins by the attempt delay, not by the timeout; the timeout only has to pass within the
            // wait below, and must not cut off a slow live connect on a loaded machine.
            let fixture = try ProtocolFixture { $0.connection.connectTimeout = TestTiming.scaled(.seconds(3)) }
            try fixture.pin("race.test", to: "127.0.0.63", "127.0.0.62")
            let url = URL(string: "http://race.test:\(live.port)/")!
            let (data, _) = try await fixture.session.data(for: URLRequest(url: url))
            #expect(text(data).contains("ip=127.0.0.62"))
            let hop = try #require(fixture.traces.last?.hops.first)
            #expect(hop.raced)
            #expect(hop.failedAttempts.isEmpty, "the request never waited on the blackholed address")
            #expect(hop.address == IPAddress("127.0.0.62"))

            // The loser's connect times out in the background and is fed back: it backs off behind the winner.
            let host = try HostName("race.test")
            var ranked = try await fixture.resolver.resolveRanked(host)
            for _ in 0..<Int(250 * TestTiming.scale) where ranked.addresses.last?.failures != 1 {
                try await Task.sleep(for: .milliseconds(20))
                ranked = try await fixture.resolver.resolveRanked(host)
            }
            #expect(ranked.addresses.map(\.ip) == [IPAddress("127.0.0.62"), IPAddress("127.0.0.63")])
            #expect(ranked.addresses.last?.isBackingOff == true)
            #expect(ranked.addresses.first?.isProven == true)

            // The winner has proven itself: the next request is not raced.
            _ = try await fixture.session.data(for: URLRequest(url: url))
            let next = try #require(fixture.traces.last?.hops.first)
            #expect(!next.raced && next.address == IPAddress("127.0.0.62"))
            await fixture.shutdown()
        } cleanup: {
            await live.stop()
        }
    }

    @Test("a stalled server times out after the request's timeoutInterval")
    func timeout() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { _ in .stall }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            var request = URLRequest(url: URL(string: "http://api.test:\(server.port)/")!)
            request.timeoutInterval = 0.5
            let session = fixture.session
            let stalled = request
            let error = try await withTimeLimit(.seconds(10)) {
                await #expect(throws: URLError.self) { try await session.data(for: stalled) }
            }
            #expect(error?.code == .timedOut)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("the trace tag matches each trace to its request among many at once and never reaches the server")
    func traceTags() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            .text("\(request.path) tag=\(request.headers[RequestTrace.tagHeader.lowercased()] ?? "-")")
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            let session = fixture.session
            let port = server.port
            let bodies = try await withTimeLimit(.seconds(60)) {
                try await withThrowingTaskGroup(of: (Int, String).self) { group in
                    for index in 0..<64 {
                        group.addTask {
                            var request = URLRequest(url: URL(string: "http://api.test:\(port)/\(index)")!)
                            request.setValue("tag-\(index)", forHTTPHeaderField: RequestTrace.tagHeader)
                            let (data, _) = try await session.data(for: request)
                            return (index, text(data))
                        }
                    }
                    return try await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
                }
            }
            #expect(bodies.count == 64)
            #expect(bodies.allSatisfy { $0.value == "/\($0.key) tag=-" })
            let traces = fixture.traces
            #expect(traces.count == 64)
            #expect(
                traces.allSatisfy { trace in
                    trace.tag == "tag-" + (trace.url.split(separator: "/").last.map(String.init) ?? "?")
                })
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test(
        "a burst beyond the connection limit to a slow host queues until each request's own timeout, not the connect timeout"
    )
    func burstBeyondConnectionLimit() async throws {
        // Each answer takes twice the connect timeout, so a request queued behind a busy connection waits longer
        // than the connect timeout: AsyncHTTPClient's own queue would fail it there.
        let connectTimeout = TestTiming.scaled(.milliseconds(500))
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            .delayed(connectTimeout * 2, .text("done \(request.path)"))
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture { configuration in
                configuration.connection.connectTimeout = connectTimeout
                configuration.connection.maximumConnectionsPerHost = 2
            }
            try fixture.pin("slow.test", to: "127.0.0.5")
            let session = fixture.session
            let port = server.port
            let results = try await withTimeLimit(.seconds(120)) {
                await withTaskGroup(of: (Int, String).self) { group in
                    for index in 0..<8 {
                        group.addTask {
                            var request = URLRequest(url: URL(string: "http://slow.test:\(port)/\(index)")!)
                            request.timeoutInterval = 60
                            do {
                                let (data, _) = try await session.data(for: request)
                                return (index, text(data))
                            } catch {
                                return (index, "failed: \(error)")
                            }
                        }
                    }
                    return await group.reduce(into: [Int: String]()) { $0[$1.0] = $1.1 }
                }
            }
            #expect(results.count == 8)
            for (index, body) in results { #expect(body == "done /\(index)") }
            // The limit holds: the requests shared two connections instead of opening eight.
            #expect(server.connections <= 2)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a queued request leaves when cancelled or when its timeoutInterval runs out, and its place is not lost")
    func queuedRequestsLeave() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            request.path == "/hold" ? .delayed(TestTiming.scaled(.seconds(3)), .text("held")) : .text("quick")
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture { $0.connection.maximumConnectionsPerHost = 1 }
            try fixture.pin("queue.test", to: "127.0.0.5")
            let session = fixture.session
            let port = server.port
            // One request holds the only connection.
            let holder = Task { try await session.data(from: URL(string: "http://queue.test:\(port)/hold")!) }
            #expect(try await waitUntil { server.connections == 1 })
            // Queued behind it: one times out, one is cancelled.
            var short = URLRequest(url: URL(string: "http://queue.test:\(port)/short")!)
            short.timeoutInterval = 0.5
            let timedOut = Task { try await session.data(for: short) }
            let cancelled = Task { try await session.data(from: URL(string: "http://queue.test:\(port)/cancelled")!) }
            try await Task.sleep(for: .milliseconds(100))
            cancelled.cancel()
            await #expect(throws: (any Error).self) { _ = try await cancelled.value }
            let error = await #expect(throws: URLError.self) { _ = try await timedOut.value }
            #expect(error?.code == .timedOut)
            // The holder finishes, and the connection serves the next request: neither waiter kept a place.
            let (held, _) = try await holder.value
            #expect(text(held) == "held")
            let (quick, _) = try await withTimeLimit(.seconds(30)) {
                try await session.data(from: URL(string: "http://queue.test:\(port)/quick")!)
            }
            #expect(text(quick) == "quick")
            let trace = fixture.traces.first { $0.url.hasSuffix("/short") }
            #expect(trace?.error?.code == .timeout)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a cancellation storm: every cancelled task completes, none hangs, nothing crashes")
    func cancellationStorm() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            request.path == "/stall" ? .stall : .text(String(repeating: "x", count: 1024))
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            let session = fixture.session
            let port = server.port
            let outcomes = try await withTimeLimit(.seconds(60)) {
                try await withThrowingTaskGroup(of: String.self) { group in
                    for index in 0..<200 {
                        group.addTask {
                            let path = index.isMultiple(of: 2) ? "/stall" : "/fast"
                            let url = URL(string: "http://api.test:\(port)\(path)")!
                            return await withCheckedContinuation { continuation in
                                let task = session.dataTask(with: URLRequest(url: url)) { _, _, error in
                                    continuation.resume(
                                        returning: (error as? URLError)?.code == .cancelled
                                            ? "cancelled" : (error == nil ? "ok" : "other"))
                                }
                                task.resume()
                                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(index % 20)) {
                                    task.cancel()
                                }
                            }
                        }
                    }
                    return try await group.reduce(into: [String]()) { $0.append($1) }
                }
            }
            #expect(outcomes.count == 200)
            // Stalled requests can only end by cancellation; fast ones may finish first.
            #expect(!outcomes.contains("other"))
            #expect(outcomes.filter { $0 == "cancelled" }.count >= 100)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("cookies are sent and stored for the real host, never the IP")
    func cookies() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5") { request in
            request.path == "/login"
                ? .full(
                    status: 200,
                    // Field names in any case are the same field; a longer name that starts alike is not.
                    headers: [
                        ("Set-Cookie", "sid=abc123; Path=/"), ("set-COOKIE", "theme=dark; Path=/"),
                        ("Set-Cookie2", "old=1; Path=/"),
                    ], body: []) : echo(request)
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            _ = try await fixture.session.data(
                for: URLRequest(url: URL(string: "http://api.test:\(server.port)/login")!))
            let (data, _) = try await fixture.session.data(
                for: URLRequest(url: URL(string: "http://api.test:\(server.port)/me")!))
            // Both stored cookies go out, in the storage's order.
            #expect(text(data).contains("sid=abc123") && text(data).contains("theme=dark"), "\(text(data))")
            let stored = fixture.cookies.cookies ?? []
            #expect(stored.map(\.name).sorted() == ["sid", "theme"])
            #expect(stored.allSatisfy { $0.domain == "api.test" })
            #expect(fixture.cookies.cookies(for: URL(string: "http://127.0.0.5:\(server.port)/")!)?.isEmpty ?? true)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("a request tagged handled, an excluded host and an IP literal are not taken; unregistering stops it all")
    func scopeAndTag() async throws {
        let fixture = try ProtocolFixture {
            $0.connection.scope = InterceptionScope(exclude: [try! HostPattern("*.internal.test")])
        }
        HTTPDNSURLProtocol.register(fixture.interceptor)
        try fixture.pin("api.test", to: "127.0.0.5")
        try fixture.pin("127.0.0.99", to: "127.0.0.5")
        func taken(_ url: String, tagged: Bool = false) -> Bool {
            var request = URLRequest(url: URL(string: url)!)
            if tagged { RequestRewriting.markHandled(&request) }
            return HTTPDNSURLProtocol.canInit(with: request)
        }
        #expect(taken("http://api.test/"))
        #expect(taken("https://API.test:8443/x"))
        #expect(!taken("http://api.test/", tagged: true))
        #expect(!taken("ftp://api.test/"))
        #expect(!taken("http://db.internal.test/"))
        #expect(!taken("http://127.0.0.1/"))
        #expect(!taken("http://[::1]:80/"))
        #expect(!taken("http://localhost:80/"))
        #expect(taken("http://127.0.0.99/"))
        HTTPDNSURLProtocol.unregister()
        #expect(!taken("http://api.test/"))
        await fixture.shutdown()
    }

    @Test("clients beyond the bound are evicted least recently used first, and requests keep working")
    func boundedClients() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.5", handler: echo)
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture { $0.connection.maximumPinnedClients = 2 }
            for host in ["h1.test", "h2.test", "h3.test"] { try fixture.pin(host, to: "127.0.0.5") }
            for host in ["h1.test", "h2.test", "h3.test", "h1.test"] {
                let (data, _) = try await fixture.session.data(
                    for: URLRequest(url: URL(string: "http://\(host):\(server.port)/")!))
                #expect(text(data).contains("host=\(host):\(server.port)"))
            }
            #expect(fixture.interceptor.pinnedClientCount == 2)
            // Evicted clients are shut down in the background, and a finished shutdown is not kept.
            for _ in 0..<250 where fixture.interceptor.transport.closingCount > 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(fixture.interceptor.transport.closingCount == 0)
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    // A challenge with a realm (Basic realm="api") makes this platform's URLSession wait for a credential forever,
    // with or without the protocol (the README's notes say so); a Bearer challenge must come through.
    @Test("a 401 with a Bearer challenge reaches the caller as it is")
    func unauthorized() async throws {
        let challenge = "Bearer error=\"invalid_token\""
        let server = try await LocalHTTPServer(host: "127.0.0.5") { _ in
            .full(status: 401, headers: [("WWW-Authenticate", challenge)], body: Array("denied".utf8))
        }
        try await withCleanup { () async throws in
            let fixture = try ProtocolFixture()
            try fixture.pin("api.test", to: "127.0.0.5")
            let session = fixture.session
            let url = URL(string: "http://api.test:\(server.port)/private")!
            let (data, response) = try await withTimeLimit(.seconds(10)) {
                try await session.data(for: URLRequest(url: url))
            }
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
            #expect(text(data) == "denied")
            await fixture.shutdown()
        } cleanup: {
            await server.stop()
        }
    }

    @Test("rewriting keeps the port, brackets IPv6, sets Host and the tag; the transport strips the tag")
    func rewriting() throws {
        let request = URLRequest(url: URL(string: "https://api.test:8443/p?q=1")!)
        let v4 = try RequestRewriting.rewrite(request, to: IPAddress("10.0.0.1")!)
        #expect(v4.url?.absoluteString == "https://10.0.0.1:8443/p?q=1")
        #expect(v4.value(forHTTPHeaderField: "Host") == "api.test:8443")
        #expect(RequestRewriting.isHandled(v4))
        let v6 = try RequestRewriting.rewrite(
            URLRequest(url: URL(string: "http://api.test/")!), to: IPAddress("2001:db8::1")!)
        #expect(v6.url?.absoluteString == "http://[2001:db8::1]/")
        #expect(v6.value(forHTTPHeaderField: "Host") == "api.test")
        var cleared = v6
        RequestRewriting.clearHandled(&cleared)
        #expect(!RequestRewriting.isHandled(cleared))
    }
}

/// A data delegate that collects the body and the completion.
final class DataCollector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // Lock discipline: every field is read and written under `lock`.
    private let lock = NSLock()
    private var data = Data()
    private var continuation: CheckedContinuation<(Data, (any Error)?), Never>?
    private var outcome: (Data, (any Error)?)?
    private var sizes: [Int] = []
    private var responded = false

    /// The size of each part `didReceive(data)` was called with, in order.
    var partSizes: [Int] { lock.withLock { sizes } }
    /// Whether the response came before any part.
    var respondedFirst: Bool { lock.withLock { responded } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        lock.withLock { responded = sizes.isEmpty }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock {
            self.data.append(data)
            sizes.append(data.count)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let waiting = lock.withLock { () -> CheckedContinuation<(Data, (any Error)?), Never>? in
            outcome = (data, error)
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(returning: (data, error))
    }

    func result() async -> (Data, (any Error)?) {
        await withCheckedContinuation { continuation in
            let ready = lock.withLock { () -> (Data, (any Error)?)? in
                if let outcome { return outcome }
                self.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

extension URLProtocolTests {
    @Test("settings file edits reach the running resolver and interceptor; a broken edit keeps the last good settings")
    func liveSettings() async throws {
        try await DNSMasq.with { first in
            try await DNSMasq.with(records: [
                "host-record=moved.test,127.0.0.61,300", "host-record=later.test,127.0.0.62,300",
            ]) { second in
                let files = try TemporaryFiles()
                func settings(server: ServerAddress, exclude: String) -> String {
                    """
                    { "sources": { "order": ["overrides", "cache", "cares"], "systemFallback": false },
                      "cares": { "servers": ["\(server)"], "search": [], "timeoutMs": 5000 },
                      "hosts": { "file": "/nonexistent/hosts" }, "reload": { "intervalMs": 20 },
                      "probe": { "enabled": false }, "cache": { "path": "\(files.directory.path)/cache.json" },
                      "interception": { "exclude": [\(exclude)] } }
                    """
                }
                let path = try files.write("settings.json", settings(server: first.address, exclude: ""))
                let runtime = try HTTPDNSRuntime.start(configurationFile: path)
                #expect(try await runtime.resolver.resolveRanked("multi.test", family: .ipv4).origin == .cares)
                #expect(runtime.interceptor.intercepts(URLRequest(url: URL(string: "http://api.excluded.test/")!)))

                try settings(server: second.address, exclude: #""*.excluded.test""#).write(
                    toFile: path, atomically: true, encoding: .utf8)
                #expect(
                    try await waitUntil {
                        (try? await runtime.resolver.resolveRanked("moved.test", family: .ipv4))?.best?.description
                            == "127.0.0.61"
                    })
                // The resolver takes the new settings first, the interceptor right after.
                #expect(
                    try await waitUntil {
                        !runtime.interceptor.intercepts(URLRequest(url: URL(string: "http://api.excluded.test/")!))
                    }, "the new scope")

                try "{ \"sources\": { \"order\": [".write(toFile: path, atomically: false, encoding: .utf8)
                try await Task.sleep(for: .milliseconds(200))
                #expect(
                    try await runtime.resolver.resolveRanked("later.test", family: .ipv4).best?.description
                        == "127.0.0.62", "still the second server")
                #expect(runtime.resolver.appliedSettings?.cares.servers == [second.address])

                try runtime.setOverride(["127.0.0.63"], for: "moved.test")
                #expect(
                    try await runtime.resolver.resolveRanked("moved.test").best?.description == "127.0.0.63",
                    "run-time overrides without a file")
                try runtime.removeOverride("moved.test")
                await runtime.shutdown()
                #expect(HTTPDNSURLProtocol.interceptor == nil, "shutdown unregisters")
                #expect(
                    FileManager.default.fileExists(atPath: files.directory.path + "/cache.json"),
                    "shutdown saves the cache")
            }
        }
    }

    @Test("a session configuration gets its own interceptor without replacing the process's")
    func coexistingInterceptors() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.64", handler: echo)
        let processWide = try ProtocolFixture()
        HTTPDNSURLProtocol.register(processWide.interceptor)
        try processWide.pin("two.test", to: "127.0.0.99")
        let own = try ProtocolFixture()
        try own.pin("two.test", to: "127.0.0.64")
        let configuration = URLSessionConfiguration.ephemeral
        #expect(HTTPDNSURLProtocol.install(own.interceptor, into: configuration))
        #expect(HTTPDNSURLProtocol.interceptor === processWide.interceptor, "the process's interceptor stays")
        let session = URLSession(configuration: configuration)
        let (data, _) = try await session.data(from: URL(string: "http://two.test:\(server.port)/x")!)
        #expect(text(data).contains("/x"), "the session's own interceptor answered")
        #expect(own.traces.count == 1 && processWide.traces.isEmpty)

        let proxied = URLSessionConfiguration.ephemeral
        proxied.connectionProxyDictionary = ["HTTPEnable": true, "HTTPProxy": "127.0.0.9", "HTTPPort": 3128]
        #expect(!HTTPDNSURLProtocol.install(own.interceptor, into: proxied), "a proxied configuration is left alone")
        session.finishTasksAndInvalidate()
        HTTPDNSURLProtocol.unregister()
        await server.stop()
        await own.shutdown()
        await processWide.shutdown()
    }
}

extension URLProtocolTests {
    @Test("a server that offers only TLS 1.1 is refused: TLS 1.2 at least")
    func tlsOnePointTwoAtLeast() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(
            host: "127.0.0.65", tls: try certificates.leaf(for: "old.test"), legacyTLSOnly: true, handler: echo)
        let fixture = try ProtocolFixture { $0.connection.additionalTrustRoots = [certificates.caPath] }
        try fixture.pin("old.test", to: "127.0.0.65")
        do {
            _ = try await fixture.session.data(from: URL(string: "https://old.test:\(server.port)/")!)
            Issue.record("a TLS 1.1 server must be refused")
        } catch let error as URLError {
            #expect(error.code == .secureConnectionFailed || error.code == .serverCertificateUntrusted, "\(error)")
        }
        await server.stop()
        await fixture.shutdown()
    }

    @Test("both fronts refuse negative redirect and failover limits; the interceptor refuses body limits of zero")
    func limitsChecked() async throws {
        let resolver = HostResolver(upstreams: [], cache: HostCache(), prober: nil)
        var redirects = HTTPDNSInterceptor.Configuration()
        redirects.connection.maximumRedirects = -1
        var failovers = HTTPDNSClient.Configuration()
        failovers.maximumFailovers = -1
        var body = HTTPDNSInterceptor.Configuration()
        body.maximumResponseBytes = 0
        for attempt in [
            { _ = try HTTPDNSInterceptor(resolver: resolver, configuration: redirects) },
            { _ = try HTTPDNSClient(resolver: resolver, configuration: failovers) },
            { _ = try HTTPDNSInterceptor(resolver: resolver, configuration: body) },
        ] as [() throws -> Void] {
            do {
                try attempt()
                Issue.record("a configuration with a bad limit was taken")
            } catch let error as HTTPDNSError {
                #expect(error.code == .invalidConfiguration)
            }
        }
        let client = try HTTPDNSClient(resolver: resolver)
        await client.shutdown()
        await resolver.shutdown()
    }

    @Test("https to http redirects are refused unless allowed; the redirect handler can inspect, change or stop")
    func redirectPolicy() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let plain = try await LocalHTTPServer(host: "127.0.0.65", handler: echo)
        let secure = try await LocalHTTPServer(host: "127.0.0.65", tls: try certificates.leaf(for: "sec.test")) {
            request in
            switch request.path {
            case "/down": .redirect(to: "http://plain.test:\(plain.port)/landed")
            case "/up": .redirect(to: "/secure-landed")
            default: .text("secure \(request.path)")
            }
        }
        let refusing = try ProtocolFixture { $0.connection.additionalTrustRoots = [certificates.caPath] }
        try refusing.pin("sec.test", to: "127.0.0.65")
        try refusing.pin("plain.test", to: "127.0.0.65")
        do {
            _ = try await refusing.session.data(from: URL(string: "https://sec.test:\(secure.port)/down")!)
            Issue.record("an https to http redirect must be refused")
        } catch let error as URLError {
            #expect(error.code == .appTransportSecurityRequiresSecureConnection)
        }
        await refusing.shutdown()

        let seen = Locked<[String]>([])
        let allowing = try ProtocolFixture {
            $0.connection.additionalTrustRoots = [certificates.caPath]
            $0.connection.allowsInsecureRedirects = true
            $0.redirectHandler = { response, next in
                seen.withLock { $0.append("\(response.statusCode) \(next.url?.path ?? "")") }
                return next.url?.path == "/secure-landed" ? nil : next
            }
        }
        try allowing.pin("sec.test", to: "127.0.0.65")
        try allowing.pin("plain.test", to: "127.0.0.65")
        let (landed, _) = try await allowing.session.data(from: URL(string: "https://sec.test:\(secure.port)/down")!)
        #expect(text(landed).hasPrefix("GET /landed"), "allowed: followed to http")
        let (_, stopped) = try await allowing.session.data(from: URL(string: "https://sec.test:\(secure.port)/up")!)
        #expect((stopped as? HTTPURLResponse)?.statusCode == 302, "the handler stopped it: the 3xx is delivered")
        #expect(seen.withLock { $0 } == ["302 /landed", "302 /secure-landed"])
        await allowing.shutdown()
        await plain.stop()
        await secure.stop()
    }

    @Test("a Secure cookie never goes over plain http")
    func secureCookiesStayOnHTTPS() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.65", handler: echo)
        let fixture = try ProtocolFixture()
        try fixture.pin("jar.test", to: "127.0.0.65")
        for (name, secure) in [("plain", false), ("secret", true)] {
            var properties: [HTTPCookiePropertyKey: Any] = [.name: name, .value: "1", .domain: "jar.test", .path: "/"]
            if secure { properties[.secure] = "TRUE" }
            fixture.cookies.setCookie(try #require(HTTPCookie(properties: properties)))
        }
        let (data, _) = try await fixture.session.data(from: URL(string: "http://jar.test:\(server.port)/c")!)
        #expect(text(data).contains("plain=1"), "cookies are sent: \(text(data))")
        #expect(!text(data).contains("secret"), "but not the Secure one: \(text(data))")
        await server.stop()
        await fixture.shutdown()
    }
}

extension URLProtocolTests {
    @Test("a request's timeoutInterval covers the resolution too")
    func timeoutCoversResolution() async throws {
        let silent = try BoundUDPSocket()  // a DNS server that never answers
        defer { silent.close() }
        let fixture = try ProtocolFixture(dnsServer: silent.address)
        var request = URLRequest(url: URL(string: "http://slow-dns.test:8080/")!)
        request.timeoutInterval = 0.3
        do {
            _ = try await fixture.session.data(for: request)
            Issue.record("nothing can answer")
        } catch let error as URLError {
            #expect(error.code == .timedOut, "the request's time ran out while resolving: \(error)")
        }
        await fixture.shutdown()
    }
}

extension URLProtocolTests {
    @Test(
        "a host that cannot be resolved fails as resolutionFailed carrying the resolver's error; URLSession: cannotFindHost"
    )
    func unresolvableHost() async throws {
        // A DNS server's port with nothing behind it: c-ares is refused at once (ICMP port unreachable on loopback).
        let dnsServer = ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: try FreePort.udp())
        let fixture = try ProtocolFixture(dnsServer: dnsServer)
        let request = URLRequest(url: URL(string: "http://nowhere.test:8080/p?q=1")!)
        do {
            _ = try await fixture.interceptor.load(request)
            Issue.record("nothing can resolve nowhere.test")
        } catch {
            #expect(error.code == .resolutionFailed, "\(error)")
            #expect(error.url == "http://nowhere.test:8080/p?q=1" && error.servers.isEmpty, "\(error)")
            let cause = try #require(error.source as? HTTPDNSError, "\(error)")
            #expect(cause.code == .connectionFailed && cause.host == "nowhere.test", "\(cause)")
            #expect(cause.servers == [dnsServer.description], "\(cause)")
        }
        do {
            _ = try await fixture.session.data(for: request)
            Issue.record("nothing can resolve nowhere.test")
        } catch let error as URLError {
            #expect(error.code == .cannotFindHost, "\(error)")
            #expect(HTTPDNSError(error)?.code == .resolutionFailed, "\(error)")
        }
        await fixture.shutdown()
    }
}

extension URLProtocolTests {
    @Test("URL passwords and Authorization values never reach errors or traces")
    func secretsRedacted() async throws {
        let server = try await LocalHTTPServer(host: "127.0.0.65", handler: echo)
        let fixture = try ProtocolFixture()
        try fixture.pin("cred.test", to: "127.0.0.65")
        let error = HTTPDNSError(code: .connectionFailed, message: "x", url: "https://user:hunter2@cred.test/p")
        #expect(!error.description.contains("hunter2") && error.description.contains("user:***@cred.test"))

        var request = URLRequest(url: URL(string: "http://user:hunter2@cred.test:\(server.port)/p")!)
        // Foundation drops a value with CR LF itself; a control character gets through to the protocol.
        request.setValue("Bearer topsecret\u{01}", forHTTPHeaderField: "Authorization")
        try #require(request.value(forHTTPHeaderField: "Authorization") != nil)
        do {
            _ = try await fixture.interceptor.load(request)
            Issue.record("a header value with a control character cannot be sent")
        } catch {
            #expect(error.code == .invalidRequest, "\(error)")
            #expect(!"\(error)".contains("topsecret") && !"\(error)".contains("hunter2"), "\(error)")
            #expect(error.source == nil)
        }
        let trace = try #require(fixture.traces.last)
        #expect(!trace.url.contains("hunter2") && !trace.hops.contains { $0.url.contains("hunter2") })
        await server.stop()
        await fixture.shutdown()
    }
}

extension URLProtocolTests {
    @Test(
        "fault injection: a slowly dripping body runs into timeoutInterval; an unclean TLS close mid-answer is a clear error"
    )
    func drippingAndTruncated() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let server = try await LocalHTTPServer(host: "127.0.0.65", tls: try certificates.leaf(for: "faulty.test")) {
            request in
            request.path == "/drip" ? .drip(bytes: 100, every: .milliseconds(50)) : .truncated
        }
        let fixture = try ProtocolFixture { $0.connection.additionalTrustRoots = [certificates.caPath] }
        try fixture.pin("faulty.test", to: "127.0.0.65")
        var drip = URLRequest(url: URL(string: "https://faulty.test:\(server.port)/drip")!)
        drip.timeoutInterval = 0.5
        do {
            _ = try await fixture.session.data(for: drip)
            Issue.record("100 bytes at 50 ms each cannot arrive within 0.5 s")
        } catch let error as URLError {
            #expect(error.code == .timedOut, "\(error)")
        }
        do {
            _ = try await fixture.session.data(from: URL(string: "https://faulty.test:\(server.port)/cut")!)
            Issue.record("a truncated answer must fail")
        } catch let error as URLError {
            let underlying = HTTPDNSError(error)
            #expect(
                underlying?.code == .connectionLost || underlying?.code == .badResponse
                    || underlying?.code == .tlsFailure, "\(error)")
        }
        await server.stop()
        await fixture.shutdown()
    }

    @Test("fault injection: a storm of 5xx answers is delivered as it is, each request once, nothing retried")
    func serverErrorStorm() async throws {
        let hits = Atomic<Int>(0)
        let server = try await LocalHTTPServer(host: "127.0.0.65") { _ in
            hits.add(1, ordering: .relaxed)
            return .text("overloaded", status: 503)
        }
        let fixture = try ProtocolFixture()
        try fixture.pin("storm.test", to: "127.0.0.65", "127.0.0.99")
        let session = fixture.session
        let port = server.port
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let (_, response) = try await session.data(from: URL(string: "http://storm.test:\(port)/\(index)")!)
                    return (response as? HTTPURLResponse)?.statusCode ?? 0
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 64 && statuses.allSatisfy { $0 == 503 })
        #expect(hits.load(ordering: .relaxed) == 64, "a 5xx is an answer: never sent again to another address")
        await server.stop()
        await fixture.shutdown()
    }
}
