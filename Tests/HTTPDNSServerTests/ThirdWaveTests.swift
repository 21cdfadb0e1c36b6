import Foundation
import Glibc
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSCore
@testable import HTTPDNSServer
@testable import HTTPDNSSettings

/// The third wave of attacks on `hostsctl serve` (docs/security.md), each driven over real sockets: request bodies
/// held open on HTTP/2, well-behaved keep-alive connections holding every place, forged UDP sources taking the relay
/// places, forged upstream answers (DNS 0x20), a DNS rebinding page reading the admin listener, and the tables and
/// guards an outsider fills or slips past.
@Suite("HTTP DNS server against the third wave of attacks")
struct ThirdWaveTests {
    static let logger = Logger(label: "third-wave-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    // MARK: - HTTP/2 request bodies

    @Test(
        "HTTP/2 bodies that never end hold at most the connection's window: the server gives none of it back until a body ends, then answers and gives it back"
    )
    func http2HeldBodies() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let (server, resolver, slow) = try await HTTP2FrameTests.slowUpstreamServer(
            leaf: try certificates.leaf(for: "doh.test"))
        let client = try await HostileClientTests.H2Client.connect(port: server.port, ca: certificates.caPath)
        let recorder = client.recorder
        // 60 streams of 1,000 body bytes each, none ended: 60,000 of the window's 65,535 bytes. With automatic
        // window updates nghttp2 gave them back as they came (and so took 100 streams x 65,000 bytes).
        var frames: [HTTP2Frame] = []
        for index in 0..<60 {
            let stream = 1 + 2 * index
            frames.append(
                client.headers(
                    "POST", "/dns-query", stream: stream, end: false, extra: ["content-type": "application/dns-message"]
                ))
            frames.append(client.data([UInt8](repeating: 0, count: 1_000), stream: stream, end: false))
        }
        client.send(frames)
        try await Task.sleep(for: .milliseconds(500))
        #expect(recorder.connectionWindowGiven.withLock { $0 } == 0, "window given back while no body ended")
        // Each body ends (an empty DATA frame needs no window): each is answered (400: not a DNS message), and the
        // connection's window comes back.
        client.send((0..<60).map { client.data([], stream: 1 + 2 * $0, end: true) })
        let answered = try await waitUntil {
            (0..<60).allSatisfy { recorder.status(1 + 2 * $0) != nil }
        }
        #expect(answered)
        #expect(recorder.status(1) == "400")
        let given = try await waitUntil {
            recorder.connectionWindowGiven.withLock { $0 } >= 30_000
        }
        #expect(given, "window given back: \(recorder.connectionWindowGiven.withLock { $0 })")
        try? await client.channel.close()
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        await slow.stop()
    }

    @Test(
        "HTTP/2 header lists held by streams that never end are bounded for the connection: past 64 KiB of them a new stream is reset, the first ones stay"
    )
    func http2HeldHeaders() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let (server, resolver, slow) = try await HTTP2FrameTests.slowUpstreamServer(
            leaf: try certificates.leaf(for: "doh.test"))
        let client = try await HostileClientTests.H2Client.connect(port: server.port, ca: certificates.caPath)
        // Ten streams, each with a 15,000-byte header (under the 16 KiB a stream may have), none ended.
        let large = String(repeating: "a", count: 15_000)
        client.send(
            (0..<10).map { index in
                client.headers("POST", "/dns-query", stream: 1 + 2 * index, end: false, extra: ["x-padding": large])
            })
        let reset = try await waitUntil { client.recorder.reset(19) }
        #expect(reset, "the tenth stream is reset")
        #expect(!client.recorder.reset(1) && !client.recorder.reset(3), "the first streams are kept")
        try? await client.channel.close()
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        await slow.stop()
    }

    @Test("a relay cache whose names expire and are kept again keeps its order of keys bounded")
    func relayCacheOrderBounded() {
        let cache = ForwardedAnswerCache(capacity: 4)
        let start = ContinuousClock.now
        let query = DNSTransportTests.query("again.cache.test", type: 16, id: 1)
        let answer =
            [0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + Array(query[12...])
            + [0xC0, 0x0C, 0, 16, 0, 1, 0, 0, 0, 1, 0, 2, 1, 0x61]
        // Kept with a TTL of 1 s, looked up after it expired (which drops the entry), kept again: 1,000 times.
        for round in 0..<1_000 {
            let now = start + .seconds(2 * round)
            cache.keep(answer, to: query, now: now)
            _ = cache.answer(to: query, now: now + .seconds(1))
        }
        #expect(cache.orderCount <= 2 * 4 + 1, "\(cache.orderCount) keys in the order")
    }

    // MARK: - Connection places

    /// One HTTP/1.1 keep-alive request on `fd`; the status, or `nil` when the connection is closed or silent.
    static func get(_ fd: Int32, _ path: String, host: String = "127.0.0.1") -> Int? {
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count > 12 else { return nil }
        return Int(String(decoding: buffer[9..<12], as: UTF8.self))
    }

    @Test(
        "well-behaved keep-alive connections holding every place give way: a newcomer is served, the longest-idle connection is closed for it"
    )
    func idleConnectionsShed() async throws {
        let resolver = HostResolver(upstreams: [], overrides: HostOverrides(), cache: nil, prober: nil)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(
                port: 0, maximumConnections: 8, maximumConnectionsPerClient: 8,
                clientPrefixes: ClientPrefixes(ipv4: 32)),
            logger: Self.logger)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        // Eight connections of one address, each asking once and then idle (as a /healthz every 18 s would be).
        for _ in 0..<8 {
            let fd = try LoopbackTCP.connect(port: server.port, receiveTimeout: .seconds(3), from: "127.0.0.2")
            held.append(fd)
            #expect(try await offThePool { Self.get(fd, "/healthz") } == 200)
        }
        // The newcomer (before: it waited in the backlog until a connection closed, 30 s at best).
        let newcomer = try LoopbackTCP.connect(port: server.port, receiveTimeout: .seconds(3), from: "127.0.0.3")
        held.append(newcomer)
        #expect(try await offThePool { Self.get(newcomer, "/healthz") } == 200)
        // The first connection, idle the longest, was closed to make room.
        let oldest = held[0]
        let read = try await offThePool {
            var byte: UInt8 = 0
            return recv(oldest, &byte, 1, 0)
        }
        #expect(read == 0, "the longest-idle connection is closed")
        #expect(server.protocolCounts.shed == 1)
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }

    // MARK: - Forged UDP sources and the relay places

    @Test(
        "forged UDP sources of 20 networks take at most the unverified half of the relay places (the rest get TC): a TCP client's relayed query still reaches the upstream"
    )
    func forgedSourcesLeaveVerifiedRelays() async throws {
        let sink = try BoundUDPSocket()
        let cares = try CAresResolver(
            configuration: .init(servers: [sink.address], timeout: TestTiming.scaled(.seconds(5)), tries: 1))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], overrides: HostOverrides(),
            cache: HostCache(), prober: nil, onShutdown: [{ cares.shutdown() }])
        let service = HTTPDNSService(
            resolver: resolver,
            configuration: .init(otherTypes: .forward, maximumForwardedQueries: 32, udpRateLimitPerSecond: 0),
            logger: Self.logger, forwarder: CAresForwarder(resolver: cares))
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
            logger: Self.logger)
        let port = try #require(server.dnsPort)
        // Long enough for the UDP round (a second of waiting for answers that never come) and the TCP query after it,
        // on a loaded machine; the forged queries hold their places for c-ares's 5 s meanwhile.
        async let seen = offThePool { sink.questions(during: TestTiming.scaled(.seconds(4))) }
        // 20 networks (127.20.N.0/24) x 2 TXT queries for new names: 40 wanted places, 16 unverified ones.
        var truncated = 0
        try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            for network in 0..<20 {
                for index in 0..<2 {
                    group.addTask {
                        try await DNSTransportTests.udp(
                            port, DNSTransportTests.query("f\(network)-\(index).forged.test", type: 16, id: 7),
                            from: "127.20.\(network).1", wait: TestTiming.scaled(.seconds(1)))
                    }
                }
            }
            for try await answer in group where answer.map({ $0.count >= 4 && $0[2] & 0x02 != 0 }) ?? false {
                truncated += 1
            }
        }
        #expect(truncated >= 20, "UDP past the unverified share is told to use TCP: \(truncated) TC answers")
        // A verified client's relayed query (TCP) reaches the upstream: before, one counter for every transport
        // was full and it got SERVFAIL without being sent.
        let (fd, _) = try await offThePool {
            try UpstreamWorkTests.pipeline(port, ["tcp.verified.test"], type: 16, wait: .milliseconds(500))
        }
        close(fd)
        let asked = try await seen
        #expect(asked.contains("tcp.verified.test"), "the TCP client's query went upstream")
        #expect(Set(asked.filter { $0.hasSuffix("forged.test") }).count <= 16)
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        sink.close()
    }

    // MARK: - Forged upstream answers (DNS 0x20)

    @Test(
        "every query serve relays goes out in a random mix of cases; an answer that does not echo it byte for byte is dropped, and the client is never given it"
    )
    func caseRandomisedQueries() async throws {
        let upstream = try BoundUDPSocket()
        let cares = try CAresResolver(
            configuration: .init(servers: [upstream.address], timeout: TestTiming.scaled(.seconds(3)), tries: 1))
        defer { cares.shutdown() }
        let name = "mixedcaseletters.forged.test"
        let query = DNSTransportTests.query(name, type: 16, id: 0)
        // The upstream answers with the question lower-cased, as a forger who did not see the query would.
        let forged = Task { try await cares.send(message: query) }
        var asked: [[UInt8]] = []
        for _ in 0..<2 {
            let received = try await offThePool { upstream.receive(within: TestTiming.scaled(.seconds(3))) }
            let (message, source) = try #require(received)
            asked.append(message)
            var answer = message
            answer[2] = 0x81
            answer[3] = 0x80
            for index in 12..<(12 + name.utf8.count + 2) where (65...90).contains(answer[index]) {
                answer[index] |= 0x20
            }
            upstream.send(answer, to: source)
        }
        let outcome = await forged.result
        #expect(throws: HTTPDNSError.self) { try outcome.get() }
        // The names went out with upper-case letters (2^-26 that a random mix has none), each mix its own.
        let questions = asked.map { String(decoding: $0[13..<(13 + 16)], as: UTF8.self) }
        #expect(questions.allSatisfy { $0 != $0.lowercased() }, "\(questions)")
        // An answer that echoes the mix is taken, and comes back with the caller's question.
        let honest = Task { try await cares.send(message: query) }
        let received = try await offThePool { upstream.receive(within: TestTiming.scaled(.seconds(3))) }
        let (message, source) = try #require(received)
        var answer = message
        answer[2] = 0x81
        answer[3] = 0x80
        upstream.send(answer, to: source)
        let taken = try await honest.value
        #expect(Array(taken[12..<query.count]) == Array(query[12...]))
    }

    @Test("with randomizesCase (serve's setting) address queries go out in a mixed case too, and an echo is taken")
    func caseRandomisedAddressQueries() async throws {
        let upstream = try BoundUDPSocket()
        var configuration = CAresResolver.Configuration(
            servers: [upstream.address], timeout: TestTiming.scaled(.seconds(3)), tries: 1)
        configuration.randomizesCase = true
        let cares = try CAresResolver(configuration: configuration)
        defer { cares.shutdown() }
        let host = try HostName("lettersonly.forged.test")
        let lookup = Task { try await cares.resolve(host, family: .ipv4) }
        let received = try await offThePool { upstream.receive(within: TestTiming.scaled(.seconds(3))) }
        let (message, source) = try #require(received)
        let asked = String(decoding: message[13..<(13 + 11)], as: UTF8.self)
        #expect(asked != asked.lowercased(), "\(asked)")
        // The question as asked, then one A record pointing back at it.
        let reply =
            Array(message[0..<2]) + [0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + Array(message[12..<(12 + 25 + 4)])
            + [0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 77]
        upstream.send(reply, to: source)
        let resolution = try await lookup.value
        #expect(resolution.addresses.map(\.ip.description) == ["192.0.2.77"])
    }

    @Test("a relayed answer carries no OPT record to a client that sent none, and keeps the upstream's to one that did")
    func relayedEDNSOnlyToEDNSClients() async throws {
        let upstream = try BoundUDPSocket()
        let cares = try CAresResolver(
            configuration: .init(servers: [upstream.address], timeout: TestTiming.scaled(.seconds(3)), tries: 1))
        let resolver = HostResolver(
            upstreams: [], overrides: HostOverrides(), cache: nil, prober: nil, onShutdown: [{ cares.shutdown() }])
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(otherTypes: .forward, udpRateLimitPerSecond: 0),
            logger: Self.logger, forwarder: CAresForwarder(resolver: cares))
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
            logger: Self.logger)
        let port = try #require(server.dnsPort)
        /// Answers the next relayed query with one TXT record and the OPT record it came with.
        @Sendable func answerOne() throws {
            let (message, source) = try #require(upstream.receive(within: TestTiming.scaled(.seconds(3))))
            let nameEnd = try #require(DNSMessageWalk.skipName(message, from: 12))
            // The server's own OPT record, with its forwarding marker, whatever the client sent.
            #expect(ForwardingMarker.read(message) != nil)
            let reply =
                Array(message[0..<2]) + [0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 1] + Array(message[12..<(nameEnd + 4)])
                + [0xC0, 0x0C, 0, 16, 0, 1, 0, 0, 0, 60, 0, 3, 2, 0x6f, 0x6b] + [
                    0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0,
                ]
            upstream.send(reply, to: source)
        }
        for (index, edns) in [(1, false), (2, true)] {
            let query = DNSTransportTests.query("e\(index).relay.test", type: 16, id: 7, edns: edns ? 1_232 : nil)
            async let answered = DNSTransportTests.udp(port, query)
            try await offThePool { try answerOne() }
            let answer = try #require(try await answered)
            #expect(answer[7] == 1, "the TXT record")
            #expect((DNSMessageWalk.optRecord(answer) != nil) == edns, "EDNS \(edns): \(answer)")
        }
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        upstream.close()
    }

    // MARK: - The admin listener and DNS rebinding

    @Test(
        "the admin listener answers only its own names in Host (421 for a rebinding page's), and /stats.json refuses a cross-site fetch"
    )
    func adminRebinding() async throws {
        let resolver = HostResolver(upstreams: [], overrides: HostOverrides(), cache: nil, prober: nil)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger, metricsExporter: { [] })
        var configuration = HTTPDNSServer.Configuration(
            port: 0, adminListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0))
        configuration.adminHostNames = ["dns-admin.internal"]
        let server = try await HTTPDNSServer.start(service: service, configuration: configuration, logger: Self.logger)
        let port = try #require(server.adminPort)
        func status(_ path: String, host: String, extra: String = "") async throws -> Int? {
            try await offThePool {
                let fd = try LoopbackTCP.connect(port: port, receiveTimeout: .seconds(3))
                defer { close(fd) }
                let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\(extra)\r\n".utf8)
                _ = send(fd, request, request.count, Int32(MSG_NOSIGNAL))
                var buffer = [UInt8](repeating: 0, count: 8_192)
                let count = recv(fd, &buffer, buffer.count, 0)
                return count > 12 ? Int(String(decoding: buffer[9..<12], as: UTF8.self)) : nil
            }
        }
        #expect(try await status("/stats.json", host: "rebind.attacker.example:\(port)") == 421)
        #expect(try await status("/healthz", host: "rebind.attacker.example") == 421)
        #expect(try await status("/healthz", host: "localhost:9000") == 200, "an ssh tunnel's other port")
        #expect(try await status("/healthz", host: "127.0.0.1:\(port)") == 200)
        #expect(try await status("/healthz", host: "[::1]:\(port)") == 200)
        #expect(try await status("/healthz", host: "DNS-Admin.internal.") == 200)
        #expect(try await status("/stats.json", host: "localhost", extra: "Sec-Fetch-Site: cross-site\r\n") == 403)
        #expect(try await status("/stats.json", host: "localhost", extra: "Sec-Fetch-Site: same-origin\r\n") != 403)
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }

    // MARK: - Tables, guards and escapes

    @Test(
        "under serve's guard of every upstream an HTTP DNS provider allowed private answers is guarded too: its 10.0.0.7 is withheld (NXDOMAIN), as c-ares's would be"
    )
    func guardCoversHTTPDNS() async throws {
        let provider = try await LocalHTTPServer(handler: FakeHTTPDNS.dnsJSON())
        let settings = try SettingsFile.parse(
            Array(
                """
                {
                  "sources": { "order": ["httpdns"], "systemFallback": false },
                  "reload": { "intervalMs": 0 }, "probe": { "enabled": false }, "cache": { "enabled": false },
                  "guard": { "everyUpstream": true },
                  "httpdns": { "providers": ["json"],
                               "provider": { "json": { "api": "doh-json", "urls": ["\(provider.url)/resolve"],
                                                       "allowPrivateAnswers": true } } }
                }
                """.utf8), path: "guard.json", environment: [:]
        ).get().resolver
        let resolver = try HostResolver(configuration: settings, logger: Self.logger)
        // ECS off: the lookup takes the shared path (asking each upstream in turn), where the hole was; the
        // client-subnet path guarded every upstream already.
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(clientSubnetMode: .off), logger: Self.logger)
        let response = await service.handle(
            ServiceRequest(method: "GET", target: "/resolve?name=private.test&type=A", client: IPAddress("203.0.113.9"))
        )
        let body = String(decoding: response.body, as: UTF8.self)
        #expect(body.contains("\"Status\":3") && !body.contains("10.0.0.7"), "\(body)")
        // A public name from the same provider is answered.
        let public4 = await service.handle(
            ServiceRequest(method: "GET", target: "/resolve?name=v4only.test&type=A", client: IPAddress("203.0.113.9")))
        #expect(String(decoding: public4.body, as: UTF8.self).contains("192.0.2.10"))
        await resolver.shutdown()
        await provider.stop()
    }

    @Test("a name that is not a host name never reaches the busiest names; a full table evicts one name, not all")
    func busyNames() {
        let names = BusyNames(sampleEvery: 1, capacity: 8)
        for _ in 0..<64 { names.observe("evil\u{1b}]0;title\u{07}\u{1b}[2J.test") }
        #expect(names.top(10).isEmpty)
        for _ in 0..<50 { names.observe("popular.test") }
        for index in 0..<100 { names.observe("r\(index).flood.test") }
        let top = names.top(10)
        #expect(top.count == 8)
        #expect(top.first?.name == "popular.test", "a flood of new names churns the bottom only: \(top)")
        #expect(HostName.printable("a\u{1b}[2Jb\u{9b}c") == "a\\u{1b}[2Jb\\u{9b}c")
    }

    @Test("a full relay cache makes room by one answer, the oldest; the rest stay")
    func relayCacheEvictsOne() {
        let cache = ForwardedAnswerCache(capacity: 3)
        let now = ContinuousClock.now
        func txt(_ name: String) -> (query: [UInt8], answer: [UInt8]) {
            let query = DNSTransportTests.query(name, type: 16, id: 1)
            let answer =
                [0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + Array(query[12...])
                + [0xC0, 0x0C, 0, 16, 0, 1, 0, 0, 0x0E, 0x10, 0, 2, 1, 0x61]
            return (query, answer)
        }
        for index in 0..<4 {
            let (query, answer) = txt("t\(index).cache.test")
            cache.keep(answer, to: query, now: now)
        }
        #expect(cache.count == 3)
        #expect(cache.answer(to: txt("t0.cache.test").query, now: now) == nil)
        #expect(cache.answer(to: txt("t3.cache.test").query, now: now) != nil)
        #expect(cache.answer(to: txt("t1.cache.test").query, now: now) != nil)
    }

    @Test("IPv6 forms of guarded IPv4 space and the special IPv6 ranges are not public")
    func guardedForms() throws {
        for text in ["::ffff:0:10.0.0.7", "64:ff9b:1::a00:7", "100::1", "::ffff:10.0.0.7", "64:ff9b::a00:7"] {
            #expect(try #require(IPAddress(text)).isNonPublic, "\(text)")
        }
        #expect(try #require(IPAddress("2606:4700::1")).isNonPublic == false)
    }

    @Test("forged UDP sources fill only the UDP tables: a verified client's bucket survives a flood of networks")
    func rateTablesApart() {
        let limiter = RateLimiter(
            limits: .init(perSecond: 0.001, burst: 2, udpPerSecond: 0.001, udpBurst: 2), maximumClients: 160)
        let quiet = IPAddress(ipv4: 198, 51, 100, 7)
        #expect(limiter.admit(quiet) == nil)
        for index in 0..<10_000 {
            _ = limiter.admit(IPAddress(ipv4: 10, UInt8(index / 256 % 256), UInt8(index % 256), 1), unverified: true)
        }
        #expect(limiter.admit(quiet) == nil, "its second token: the bucket was kept")
        #expect(limiter.admit(quiet) != nil, "and it is spent now")
    }

    @Test(
        "a stated network the client is not in is chosen (its answers serve that statement only); a non-global one is never sent upstream"
    )
    func chosenNetworks() throws {
        let resolver = HostResolver(upstreams: [], overrides: HostOverrides(), cache: nil, prober: nil)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let configuration = service.configuration
        let client = try #require(IPAddress("203.0.113.9"))
        let own = service.clientNetwork(stated: IPNetwork("203.0.113.0/24"), client: client, configuration)
        #expect(own.subnet == IPNetwork("203.0.113.0/24") && !own.chosen)
        let other = service.clientNetwork(stated: IPNetwork("198.51.100.0/24"), client: client, configuration)
        #expect(other.subnet == IPNetwork("198.51.100.0/24") && other.chosen)
        let wide = service.clientNetwork(stated: IPNetwork("203.0.0.0/16"), client: client, configuration)
        #expect(wide.chosen)
        let guarded = service.clientNetwork(stated: IPNetwork("10.9.9.0/24"), client: client, configuration)
        #expect(guarded.subnet == IPNetwork("203.0.113.0/24") && !guarded.chosen, "the client's own, not 10.9.9.0/24")
    }

    @Test("TLS handshakes: one network gets a sixteenth of the rate, the others still theirs; the total holds too")
    func handshakeRates() throws {
        let budget = HandshakeBudget(perSecond: 160, prefixes: ClientPrefixes())
        let now = ContinuousClock.now
        let one = try #require(IPAddress("198.51.100.7"))
        // A network's share is a sixteenth (10 a second), with a burst of twice that: 20 at once, then none.
        let taken = (0..<100).filter { _ in budget.admit(one, now: now) }.count
        #expect(taken == 20)
        #expect(budget.admit(IPAddress(ipv4: 198, 51, 100, 200), now: now) == false, "the same /24")
        // Other networks have their own shares, until the total's burst (320) is spent.
        var others = 0
        for network in 0..<40 {
            for _ in 0..<20 where budget.admit(IPAddress(ipv4: 203, 0, UInt8(network), 1), now: now) { others += 1 }
        }
        #expect(others == 300, "the total's burst of 320, 20 of them taken by the first network")
        // A second later each network's share has come back.
        #expect(budget.admit(one, now: now + .seconds(1)))
    }

    @Test("report signatures: each is taken once, expired ones make room without a scan, a full table refuses")
    func replaySignatures() {
        let replays = ReplayGuard(capacity: 3)
        #expect(replays.first("a", expiry: 100, now: 50))
        #expect(!replays.first("a", expiry: 100, now: 60), "a replay")
        #expect(replays.first("b", expiry: 110, now: 60))
        #expect(replays.first("c", expiry: 120, now: 60))
        #expect(!replays.first("d", expiry: 130, now: 60), "full of unexpired signatures: refused")
        #expect(replays.first("d", expiry: 130, now: 101), "a expired and made room")
        #expect(replays.count == 3)
    }

    @Test("a reload of cares.* moves relayed queries to the new servers")
    func relayFollowsReload() async throws {
        let old = try BoundUDPSocket()
        let new = try BoundUDPSocket()
        defer {
            old.close()
            new.close()
        }
        let forwarder = try ReloadingCAresForwarder(
            configuration: .init(servers: [old.address], timeout: .milliseconds(300), tries: 1), logger: Self.logger)
        defer { forwarder.shutdown() }
        try forwarder.apply(.init(servers: [new.address], timeout: .milliseconds(300), tries: 1))
        async let newSeen = offThePool { new.questions(during: .seconds(1)) }
        async let oldSeen = offThePool { old.questions(during: .seconds(1)) }
        _ = try? await forwarder.forward(DNSTransportTests.query("moved.reload.test", type: 16, id: 0))
        #expect(try await newSeen.contains("moved.reload.test"))
        #expect(try await oldSeen.isEmpty)
    }

    // MARK: - DNS cookies

    @Test("SipHash-2-4 and RFC 9018's server cookie give their published test vectors")
    func cookieVectors() throws {
        // SipHash-2-4, key 00..0f, message 00..0e (the reference implementation's vectors).
        let key = (UInt64(0x0706_0504_0302_0100), UInt64(0x0f0e_0d0c_0b0a_0908))
        #expect(SipHash24.hash(Array(0..<15), key: key) == 0xa129_ca61_49be_45e5)
        #expect(SipHash24.hash([], key: key) == 0x726f_db47_dd0e_0e31)
        // RFC 9018 appendix A.1: client cookie 2464c4abcf10c957 from 198.51.100.100, secret
        // e5e973e5a6b2a43f48e7dc849e37bfcf, timestamp 1559731985.
        let secret: [UInt8] = [
            0xe5, 0xe9, 0x73, 0xe5, 0xa6, 0xb2, 0xa4, 0x3f, 0x48, 0xe7, 0xdc, 0x84, 0x9e, 0x37, 0xbf, 0xcf,
        ]
        func word(_ bytes: ArraySlice<UInt8>) -> UInt64 {
            bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let cookies = DNSCookies(key: (word(secret[0..<8]), word(secret[8..<16])))
        let client: [UInt8] = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57]
        let option = cookies.option(client: client, address: IPAddress("198.51.100.100"), now: 1_559_731_985)
        let server: [UInt8] = [0x01, 0, 0, 0, 0x5c, 0xf7, 0x9f, 0x11, 0x1f, 0x81, 0x30, 0xc3, 0xee, 0xe2, 0x94, 0x80]
        #expect(Array(option[12...]) == server)
        #expect(
            cookies.isValid(server: server, client: client, address: IPAddress("198.51.100.100"), now: 1_559_733_000))
        #expect(
            !cookies.isValid(server: server, client: client, address: IPAddress("198.51.100.101"), now: 1_559_733_000))
        #expect(
            !cookies.isValid(server: server, client: client, address: IPAddress("198.51.100.100"), now: 1_559_740_000))
    }

    /// A query for `name` with an OPT record carrying `cookie` (client cookie, then the server cookie if any).
    static func query(_ name: String, cookie: [UInt8], id: UInt16) -> [UInt8] {
        var message = DNSTransportTests.query(name, id: id, edns: 1_232)
        message += [0, 10, 0, UInt8(cookie.count)] + cookie
        message[message.count - cookie.count - 6] = 0
        message[message.count - cookie.count - 5] = UInt8(4 + cookie.count)
        return message
    }

    @Test("a query with two COOKIE options is malformed (FORMERR): taking one out never leaves another behind")
    func twoCookies() throws {
        let one = Self.query("fast.test", cookie: Array(repeating: 1, count: 8), id: 1)
        guard case .cookie(_, nil, _) = DNSCookies.find(in: one) else {
            Issue.record("one client cookie is found")
            return
        }
        // A second COOKIE option after the first (OPT is the last record): its RDLENGTH grows by 12.
        let options = try #require(DNSMessageWalk.optOptions(one))
        var two = one + [0, 10, 0, 8] + Array(repeating: 2, count: 8)
        two[options.lowerBound - 1] += 12
        #expect(DNSMessageWalk.optOptions(two)?.count == options.count + 12)
        #expect(DNSCookies.find(in: two) == .malformed)
        // The first well formed, the second of no length: what the fuzzer found (stripping the first left it).
        var empty = one + [0, 10, 0, 0]
        empty[options.lowerBound - 1] += 4
        #expect(DNSCookies.find(in: empty) == .malformed)
    }

    /// The COOKIE option's data in an answer, if any.
    static func cookie(in answer: [UInt8]) -> [UInt8]? {
        guard let options = DNSMessageWalk.optOptions(answer) else { return nil }
        var offset = options.lowerBound
        while offset + 4 <= options.upperBound {
            let length = Int(answer[offset + 2]) << 8 | Int(answer[offset + 3])
            if answer[offset] == 0, answer[offset + 1] == 10 { return Array(answer[offset + 4..<offset + 4 + length]) }
            offset += 4 + length
        }
        return nil
    }

    @Test(
        "a UDP client that returns its server cookie is verified (past the UDP rate limit), a forged source replaying it is not, a malformed cookie gets FORMERR"
    )
    func cookiesVerifyUDP() async throws {
        let overrides = HostOverrides()
        overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: nil, prober: nil)
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(udpRateLimitPerSecond: 0.01, udpRateLimitBurst: 1),
            logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
            logger: Self.logger)
        let port = try #require(server.dnsPort)
        let client: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        func answered(_ answer: [UInt8]?) -> Bool {
            guard let answer, answer.count > 12 else { return false }
            return answer[2] & 0x02 == 0 && answer[7] == 1
        }
        // The first query (the bucket's one token) learns the server cookie.
        let first = try await DNSTransportTests.udp(port, Self.query("fast.test", cookie: client, id: 1))
        #expect(answered(first))
        let firstAnswer = try #require(first)
        let learnt = try #require(Self.cookie(in: firstAnswer))
        #expect(learnt.count == 24 && Array(learnt[0..<8]) == client, "the client cookie and a 16-byte server cookie")
        // Without it the client is over its UDP rate now; with it, verified, it is answered every time.
        let plain = try await DNSTransportTests.udp(
            port, DNSTransportTests.query("fast.test", id: 2), wait: .milliseconds(500))
        #expect(!answered(plain))
        for id in 3..<8 {
            let answer = try await DNSTransportTests.udp(port, Self.query("fast.test", cookie: learnt, id: UInt16(id)))
            #expect(answered(answer), "query \(id) with the server cookie")
        }
        // Another address replaying the cookie is not verified: past its one token it is limited.
        _ = try await DNSTransportTests.udp(port, DNSTransportTests.query("fast.test", id: 8), from: "127.0.1.1")
        let replayed = try await DNSTransportTests.udp(
            port, Self.query("fast.test", cookie: learnt, id: 9), from: "127.0.1.1", wait: .milliseconds(500))
        #expect(!answered(replayed))
        // A cookie of 10 bytes is malformed (RFC 7873 §5.2.2).
        let malformed = try await DNSTransportTests.udp(
            port, Self.query("fast.test", cookie: Array(repeating: 9, count: 10), id: 10), from: "127.0.2.1")
        #expect(malformed.map { $0[3] & 0x0F } == 1)
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }
}
