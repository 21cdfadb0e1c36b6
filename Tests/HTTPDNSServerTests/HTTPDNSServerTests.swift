import Crypto
import Foundation
import Glibc
import Logging
import Prometheus
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSSettings
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// `HTTPDNSServer` answering from a real pipeline (an override, c-ares against a real dnsmasq), asked by this
/// package's own HTTP DNS client through every API, over HTTP/1.1 and over TLS with HTTP/2, and by hand with
/// malformed requests.
@Suite("HTTP DNS server")
struct HTTPDNSServerTests {
    static let logger = Logger(label: "server-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A served pipeline: `pinned.test` is an override (127.0.0.77), the rest comes from dnsmasq's test zone.
    struct Lab {
        let dnsmasq: DNSMasq
        let resolver: HostResolver
        let service: HTTPDNSService
        let server: HTTPDNSServer

        static func start(tls: TestCertificates.Leaf? = nil, now: (@Sendable () -> Int64)? = nil) async throws -> Lab {
            let dnsmasq = try await DNSMasq.start()
            let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(2)))
            let overrides = HostOverrides()
            overrides.set([try #require(IPAddress("127.0.0.77"))], for: try HostPattern("pinned.test"))
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], overrides: overrides,
                cache: HostCache(), prober: nil, onShutdown: [{ cares.shutdown() }])
            let configuration = HTTPDNSService.Configuration(
                maximumAnswers: 8, accounts: ["139450": nil, "signed-1": HTTPDNSSecret("s3cret")],
                publicEndpoints: .on)
            let service =
                now.map { HTTPDNSService(resolver: resolver, configuration: configuration, logger: logger, now: $0) }
                ?? HTTPDNSService(resolver: resolver, configuration: configuration, logger: logger)
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    host: "127.0.0.1", port: 0, certificatePath: tls?.certificatePath, privateKeyPath: tls?.keyPath),
                logger: logger)
            return Lab(dnsmasq: dnsmasq, resolver: resolver, service: service, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            dnsmasq.stop()
        }
    }

    /// This package's HTTP DNS client for `api` at `url`.
    static func client(_ api: HTTPDNSResolver.API, _ url: String, trust: [String] = [], bootstrap: [IPAddress] = [])
        throws -> (HTTPDNSResolver, HTTPDNSTransport)
    {
        let transport = try HTTPDNSTransport(
            configuration: .init(
                requestTimeout: TestTiming.scaled(.seconds(15)), connectTimeout: TestTiming.scaled(.seconds(10)),
                additionalTrustRoots: trust))
        let resolver = try HTTPDNSResolver(
            configuration: .init(
                api: api, endpoints: [try HTTPDNSEndpoint(url, bootstrapAddresses: bootstrap)],
                allowNonPublicAddresses: true),
            transport: transport)
        return (resolver, transport)
    }

    static func addresses(_ resolution: Resolution) -> Set<String> { Set(resolution.addresses.map(\.ip.description)) }

    @Test("every API over HTTP/1.1 answers what the pipeline answers: DoH GET and POST, JSON, Alibaba, Tencent")
    func everyAPI() async throws {
        let lab = try await Lab.start()
        let base = "http://127.0.0.1:\(lab.server.port)"
        let apis: [(HTTPDNSResolver.API, String)] = [
            (.dnsMessage(method: .get), base + "/dns-query"),
            (.dnsMessage(method: .post), base + "/dns-query"),
            (.dnsJSON, base + "/resolve"),
            (.alibaba(account: "139450"), base),
            (.alibaba(account: "signed-1", secret: HTTPDNSSecret("s3cret")), base),
            (.tencent(), base),
        ]
        do {
            for (api, url) in apis {
                let (client, transport) = try Self.client(api, url)
                let both = try await client.resolve("multi.test", family: .any)
                #expect(Self.addresses(both) == Set(TestZone.multiV4 + TestZone.multiV6), "\(api)")
                #expect(both.addresses.allSatisfy { $0.ttl > 0 && $0.ttl <= 300 }, "\(api): remaining TTLs")
                let pinned = try await client.resolve("pinned.test", family: .ipv4)
                #expect(Self.addresses(pinned) == ["127.0.0.77"], "\(api): overrides are served")
                await #expect(throws: HTTPDNSError.self, "\(api): no address for a missing name") {
                    try await client.resolve("missing.test", family: .ipv4)
                }
                await transport.shutdown()
            }
            // RCODEs reach a DoH client as they are.
            let (doh, transport) = try Self.client(.dnsMessage(method: .get), base + "/dns-query")
            do {
                _ = try await doh.resolve("missing.test", family: .ipv4)
                Issue.record("a missing name answered")
            } catch let error as HTTPDNSError { #expect(error.code == .notFound) }
            do {
                _ = try await doh.resolve("v4only.test", family: .ipv6)
                Issue.record("no AAAA answered")
            } catch let error as HTTPDNSError { #expect(error.code == .noData) }
            await transport.shutdown()
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }

    @Test("over TLS the client speaks HTTP/2 to the server, certificate checked for the real name")
    func tlsAndHTTP2() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let lab = try await Lab.start(tls: try certificates.leaf(for: "doh.test"))
        do {
            let url = "https://doh.test:\(lab.server.port)/dns-query"
            let loopback = try #require(IPAddress("127.0.0.1"))
            for method in [HTTPDNSResolver.API.DoHMethod.get, .post] {
                let (client, transport) = try Self.client(
                    .dnsMessage(method: method), url, trust: [certificates.caPath], bootstrap: [loopback])
                // Many lookups at once share one HTTP/2 connection.
                let answers = try await withThrowingTaskGroup(of: Set<String>.self) { group in
                    for _ in 0..<50 {
                        group.addTask { Self.addresses(try await client.resolve("multi.test", family: .ipv4)) }
                    }
                    return try await group.reduce(into: [Set<String>]()) { $0.append($1) }
                }
                #expect(answers.count == 50 && answers.allSatisfy { $0 == Set(TestZone.multiV4) })
                await transport.shutdown()
            }
            // Each client made one connection and it negotiated HTTP/2.
            let counts = lab.server.protocolCounts
            #expect(counts.accepted == 2 && counts.http2 == 2 && counts.http1OverTLS == 0, "\(counts)")
            // A client that does not trust the CA refuses the server.
            let (untrusting, transport) = try Self.client(.dnsMessage(method: .get), url, bootstrap: [loopback])
            await #expect(throws: HTTPDNSError.self) { try await untrusting.resolve("multi.test", family: .ipv4) }
            await transport.shutdown()
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }

    @Test("Alibaba signatures: valid, wrong and expired; an account with a secret answers only signed requests")
    func signatures() async throws {
        let clock = Locked<Int64>(1_800_000_000)
        let lab = try await Lab.start(now: { clock.withLock { $0 } })
        let service = lab.service
        func get(_ target: String) async -> ServiceResponse {
            await service.handle(ServiceRequest(method: "GET", target: target))
        }
        func code(_ response: ServiceResponse) -> String { String(decoding: response.body, as: UTF8.self) }
        let expiry: Int64 = 1_800_000_600
        let good = AlibabaHTTPDNS.signature(host: "multi.test", secret: "s3cret", expiry: expiry)
        let valid = await get("/signed-1/sign_d?host=multi.test&t=\(expiry)&s=\(good)")
        #expect(valid.status == 200)
        #expect(
            code(valid).contains("\"ips\":[\"192.0.2.1\",\"192.0.2.2\"]")
                || code(valid).contains("192.0.2.2\",\"192.0.2.1"))
        let wrong = await get("/signed-1/sign_d?host=multi.test&t=\(expiry)&s=\(String(good.reversed()))")
        #expect(wrong.status == 403 && code(wrong).contains("InvalidSignature"))
        let otherHost = await get("/signed-1/sign_d?host=v4only.test&t=\(expiry)&s=\(good)")
        #expect(otherHost.status == 403 && code(otherHost).contains("InvalidSignature"), "a signature covers its host")
        clock.withLock { $0 = expiry + 1 }
        let expired = await get("/signed-1/sign_d?host=multi.test&t=\(expiry)&s=\(good)")
        #expect(expired.status == 403 && code(expired).contains("SignatureExpired"))
        // A signed-only account asked unsigned, an unknown account and a wrong signature answer alike: accounts
        // cannot be enumerated.
        let unsigned = await get("/signed-1/d?host=multi.test")
        let unknown = await get("/999/d?host=multi.test")
        let unknownSigned = await get("/999/sign_d?host=multi.test&t=\(expiry)&s=\(good)")
        #expect(unsigned.status == 403 && unsigned.body == wrong.body)
        #expect(unknown.status == 403 && unknown.body == wrong.body)
        #expect(unknownSigned.status == 403 && unknownSigned.body == wrong.body)
        // The same with a malformed request: the signature is checked before anything else, so a known account does
        // not answer 400 where an unknown one answers 403.
        let malformedTargets = [
            "/signed-1/d", "/signed-1/d?host=bad..name", "/signed-1/sign_d?host=", "/999/d", "/999/d?host=bad..name",
        ]
        for target in malformedTargets {
            let malformed = await get(target)
            #expect(malformed.status == 403 && malformed.body == wrong.body, "\(target): \(malformed.status)")
        }
        // An expiry far ahead is refused even with a correct signature (t = Int64.max once made a URL valid forever).
        clock.withLock { $0 = expiry - 60 }
        for far in [expiry + 600, Int64.max] {
            let signature = AlibabaHTTPDNS.signature(host: "multi.test", secret: "s3cret", expiry: far)
            let forever = await get("/signed-1/sign_d?host=multi.test&t=\(far)&s=\(signature)")
            #expect(forever.status == 403 && code(forever).contains("InvalidExpiry"), "t=\(far)")
        }
        let near = AlibabaHTTPDNS.signature(host: "multi.test", secret: "s3cret", expiry: expiry)
        #expect(await get("/signed-1/sign_d?host=multi.test&t=\(expiry)&s=\(near)").status == 200)
        await lab.stop()
    }

    @Test("query parameters: the first valid value wins, invalid encodings are skipped, raw bytes only without escapes")
    func requestTargetParameters() {
        let target = RequestTarget("/dns-query?x=%zz&dns=AAA%41&dns=BBB&flag&name=a+b&name=second")
        #expect(target.path == "/dns-query")
        #expect(target.query == ["dns": "AAAA", "flag": "", "name": "a b"])
        #expect(target.parameter("dns") == "AAAA")
        #expect(target.parameter("x") == nil)
        // The first dns value holds an escape: no raw bytes, the decoded parameter is used instead.
        #expect(target.withRawParameter("dns", { Array($0) }) == nil)
        let plain = RequestTarget("/dns-query?flag&dns=q83v&dns=other")
        #expect(plain.withRawParameter("dns", { String(decoding: $0, as: UTF8.self) }) == "q83v")
        #expect(plain.withRawParameter("flag", { Array($0) }) == nil)
        #expect(RequestTarget("/healthz").query.isEmpty)
    }

    @Test("malformed requests get a clear 4xx, never a crash; health and readiness; draining")
    func malformed() async throws {
        let lab = try await Lab.start()
        let service = lab.service
        func send(_ method: String, _ target: String, type: String? = nil, body: [UInt8] = []) async -> Int {
            await service.handle(ServiceRequest(method: method, target: target, contentType: type, body: body)).status
        }
        let query = DNSWireMessage.query(for: try HostName("multi.test"), type: .a)
        #expect(await send("POST", "/dns-query", type: "application/dns-message", body: query) == 200)
        #expect(await send("POST", "/dns-query", type: "text/plain", body: query) == 415)
        #expect(await send("POST", "/dns-query", type: "application/dns-message", body: Array(query.prefix(15))) == 400)
        #expect(await send("POST", "/dns-query", type: "application/dns-message", body: []) == 400)
        #expect(await send("GET", "/dns-query?dns=***") == 400)
        #expect(await send("GET", "/dns-query") == 400)
        #expect(await send("PUT", "/dns-query") == 405)
        #expect(await send("GET", "/resolve") == 400)
        #expect(await send("GET", "/resolve?name=multi.test&type=MX") == 400)
        #expect(await send("GET", "/d") == 400)
        #expect(await send("GET", "/d?dn=multi.test&alg=aes") == 400)
        #expect(await send("GET", "/nowhere") == 404)
        // A response as a query, two questions, a compression pointer: each a 400.
        var response = query
        response[2] |= 0x80
        #expect(await send("POST", "/dns-query", type: "application/dns-message", body: response) == 400)
        var twoQuestions = query
        twoQuestions[5] = 2
        #expect(await send("POST", "/dns-query", type: "application/dns-message", body: twoQuestions) == 400)
        let pointer: [UInt8] = Array(query.prefix(12)) + [0xC0, 0x0C, 0, 1, 0, 1]
        #expect(await send("POST", "/dns-query", type: "application/dns-message", body: pointer) == 400)
        // Random bytes never crash it.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0..<80, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            let status = await send("POST", "/dns-query", type: "application/dns-message", body: bytes)
            #expect(status == 200 || status == 400)
        }
        // Other types are not implemented (answered, not an HTTP error).
        let mx = try DNSQueryMessage(query)
        var mxQuery = query
        mxQuery[mx.question.count + 12 - 3] = 15
        let notImplemented = await service.handle(
            ServiceRequest(method: "POST", target: "/dns-query", contentType: "application/dns-message", body: mxQuery))
        #expect(notImplemented.status == 200 && notImplemented.body.count >= 4 && notImplemented.body[3] & 0xf == 4)

        #expect(await send("GET", "/healthz") == 200)
        #expect(await send("GET", "/readyz") == 200)
        lab.service.drain()
        #expect(await send("GET", "/readyz") == 503)
        #expect(await send("GET", "/healthz") == 200)
        await lab.stop()
    }

    /// Sends `request` on a fresh TCP connection to 127.0.0.1:`port` and returns what comes back until the server
    /// closes the connection or `timeout` passes (off the cooperative pool: it blocks).
    static func exchange(port: Int, _ request: [UInt8], timeout: Duration = TestTiming.scaled(.seconds(15)))
        async throws -> (
            reply: String, closedByServer: Bool
        )
    {
        try await offThePool {
            let fd = try LoopbackTCP.connect(port: port, receiveTimeout: timeout)
            defer { close(fd) }
            var sent = 0
            while sent < request.count {
                let written = request[sent...].withUnsafeBytes {
                    send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                if written <= 0 { break }  // the server may close early (e.g. after a 413)
                sent += written
            }
            var reply: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 { return (String(decoding: reply, as: UTF8.self), true) }
                if count < 0 { return (String(decoding: reply, as: UTF8.self), false) }
                reply += buffer[0..<count]
            }
        }
    }

    @Test(
        "over real connections: an oversized body is 413 and the connection closed, a bad content type 415, idle connections are closed"
    )
    func limitsOnTheWire() async throws {
        let dnsmasq = try await DNSMasq.start()
        let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address]))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], cache: nil, prober: nil,
            onShutdown: [{ cares.shutdown() }])
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, maximumBodyBytes: 1024, idleTimeout: TestTiming.scaled(.milliseconds(300))),
            logger: Self.logger)
        let query = DNSWireMessage.query(for: try HostName("multi.test"), type: .a)
        func post(_ body: [UInt8], type: String = "application/dns-message", close: Bool = true) -> [UInt8] {
            Array(
                ("POST /dns-query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n"
                    + (close ? "Connection: close\r\n" : "") + "\r\n").utf8) + body
        }
        let good = try await Self.exchange(port: server.port, post(query))
        #expect(good.reply.hasPrefix("HTTP/1.1 200") && good.reply.contains("application/dns-message"))
        let big = try await Self.exchange(port: server.port, post([UInt8](repeating: 0, count: 5000)))
        #expect(big.reply.hasPrefix("HTTP/1.1 413"), "\(big.reply.prefix(80))")
        let wrongType = try await Self.exchange(port: server.port, post(query, type: "text/plain"))
        #expect(wrongType.reply.hasPrefix("HTTP/1.1 415"))
        // Keep-alive: two requests on one connection, then silence; the server closes it after the idle timeout.
        let kept = try await Self.exchange(port: server.port, post(query, close: false) + post(query, close: false))
        #expect(kept.closedByServer, "an idle connection is closed by the server")
        #expect(kept.reply.components(separatedBy: "HTTP/1.1 200").count == 3, "both requests answered")
        // A client that connects and never sends is closed too.
        let silent = try await Self.exchange(port: server.port, [])
        #expect(silent.closedByServer && silent.reply.isEmpty)
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        dnsmasq.stop()
    }

    @Test(
        "at the connection limit the server stops accepting: a new client waits in the backlog and is served once a connection closes"
    )
    func connectionLimit() async throws {
        let resolver = HostResolver(upstreams: [], cache: nil, prober: nil)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service, configuration: .init(port: 0, maximumConnections: 2), logger: Self.logger)
        let health = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        /// Sends `request` on `fd` and returns the first bytes of the reply, or "" when none came within `timeout`.
        @Sendable func ask(_ fd: Int32, _ request: [UInt8], timeout: Duration) -> String {
            var limit = timeval(
                tv_sec: Int(timeout.components.seconds),
                tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            if !request.isEmpty {
                _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
        }
        let answer = TestTiming.scaled(.seconds(15))
        // Two connections, each busy (a request head on its way): nobody idle can give way to a newcomer
        // (ThirdWaveTests has the idle case).
        let partial = Array("GET /healthz HTTP/1.1\r\n".utf8)
        let first = try LoopbackTCP.connect(port: server.port, receiveTimeout: answer)
        _ = partial.withUnsafeBytes { send(first, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // Busy once the server has read the partial head (a loaded machine may take a while to read it).
        #expect(try await waitUntil { server.connectionCount == 1 && server.idleConnectionCount == 0 })
        let second = try LoopbackTCP.connect(port: server.port, receiveTimeout: answer)
        defer { close(second) }
        _ = partial.withUnsafeBytes { send(second, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(try await waitUntil { server.connectionCount == 2 && server.idleConnectionCount == 0 })
        // The third connect completes in the kernel's backlog, but nobody reads its request while two are open.
        let third = try LoopbackTCP.connect(port: server.port, receiveTimeout: answer)
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.protocolCounts.pauses == 1, "accepting stopped at the limit")
        defer { close(third) }
        #expect(try await offThePool { ask(third, health, timeout: .milliseconds(500)) } == "")
        #expect(server.protocolCounts.accepted == 2)
        // One closes: accepting resumes, and the waiting client gets its answer.
        close(first)
        #expect(try await offThePool { ask(third, [], timeout: answer) }.hasPrefix("HTTP/1.1 200"))
        #expect(server.protocolCounts.accepted == 3)
        #expect(server.protocolCounts.pauses == 2, "the limit was reached again")
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }

    @Test(
        "one client network at its connection limit has its new connections closed; another client is served",
        arguments: [
            // An IPv6 listener sees the IPv4 clients as ::ffff:127.0.0.1 and ::ffff:127.0.0.2: still two clients.
            "127.0.0.1", "::ffff:127.0.0.1",
        ])
    func perClientConnectionLimit(listen: String) async throws {
        let resolver = HostResolver(upstreams: [], cache: nil, prober: nil)
        let registry = PrometheusCollectorRegistry()
        let service = HTTPDNSService(
            resolver: resolver, logger: Self.logger, metricsFactory: PrometheusMetricsFactory(registry: registry),
            metricsExporter: { registry.emitToBuffer() })
        let server = try await HTTPDNSServer.start(
            service: service, configuration: .init(host: listen, port: 0, maximumConnectionsPerClient: 2),
            logger: Self.logger)
        let health = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        let timeout = TestTiming.scaled(.seconds(15))
        /// Sends `request` on a new connection from `source`, keeps it open, and returns it with the reply's start
        /// ("" when the server closed the connection without answering).
        func ask(from source: String) async throws -> (fd: Int32, reply: String) {
            try await offThePool {
                let fd = try LoopbackTCP.connect(port: server.port, receiveTimeout: timeout, from: source)
                _ = health.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(fd, &buffer, buffer.count, 0)
                return (fd, count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : "")
            }
        }
        let first = try await ask(from: "127.0.0.1")
        let second = try await ask(from: "127.0.0.1")
        let third = try await ask(from: "127.0.0.1")
        let other = try await ask(from: "127.0.1.2")
        defer { for fd in [second.fd, third.fd, other.fd] { close(fd) } }
        #expect(first.reply.hasPrefix("HTTP/1.1 200") && second.reply.hasPrefix("HTTP/1.1 200"))
        #expect(third.reply == "", "the third connection from 127.0.0.1 is closed unanswered")
        #expect(other.reply.hasPrefix("HTTP/1.1 200"), "127.0.1.2, another /24, has places of its own")
        #expect(server.protocolCounts.refusedPerClient == 1)
        let metrics = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        #expect(metrics.contains("httpdns_serve_connections_refused_total 1"), "\(metrics)")
        #expect(metrics.contains("httpdns_serve_connections_open 3"), "first, second and other are open")
        // A place freed is a place to use again.
        close(first.fd)
        #expect(try await waitUntil { server.connectionCount == 2 })
        let again = try await ask(from: "127.0.0.1")
        close(again.fd)
        #expect(again.reply.hasPrefix("HTTP/1.1 200"))
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }

    @Test(
        "a lookup slower than the idle timeout keeps its connection: only connections with nothing in progress are closed"
    )
    func slowLookupOutlivesIdleTimeout() async throws {
        let answer = FakeHTTPDNS.dnsJSON()
        // The upstream takes three idle timeouts to answer (both stretched under sanitizers).
        let idle = TestTiming.scaled(.milliseconds(400))
        let slow = try await LocalHTTPServer { request in .delayed(idle * 3, answer(request)) }
        let settings = try SettingsFile.parse(
            """
            {
              "sources": { "order": ["httpdns"], "systemFallback": false },
              "reload": { "intervalMs": 0 }, "probe": { "enabled": false }, "cache": { "enabled": false },
              "httpdns": { "providers": ["json"], "timeoutMs": 60000, "budgetMs": 60000,
                           "provider": { "json": { "api": "doh-json", "urls": ["\(slow.url)/resolve"] } } }
            }
            """.utf8.map { $0 }, path: "slow.json", environment: [:]
        ).get().resolver
        let resolver = try HostResolver(configuration: settings, logger: Self.logger)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service, configuration: .init(port: 0, idleTimeout: idle), logger: Self.logger)
        let request = Array("GET /resolve?name=multi.test&type=A HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        let reply = try await Self.exchange(port: server.port, request)
        #expect(
            reply.reply.hasPrefix("HTTP/1.1 200") && reply.reply.contains("\"Status\":0"), "\(reply.reply.prefix(120))")
        #expect(reply.closedByServer, "closed once idle after the answer")
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
        await slow.stop()
    }

    @Test("the wire format: the ID, RD and the question are echoed, every record points at the question's name")
    func wireFormat() throws {
        var query = DNSWireMessage.query(for: try HostName("multi.test"), type: .aaaa)
        query[0] = 0xAB
        query[1] = 0xCD
        let parsed = try DNSQueryMessage(query)
        #expect(parsed.id == 0xABCD && parsed.name == "multi.test" && parsed.type == 28 && parsed.recursionDesired)
        let records = [
            DNSAnswerMessage.Record(data: try #require(IPAddress("2001:db8::1")).bytes, ttl: 77),
            DNSAnswerMessage.Record(data: try #require(IPAddress("2001:db8::2")).bytes, ttl: 77),
        ]
        var answer = DNSAnswerMessage.encode(answering: parsed, code: .noError, records: records)
        #expect(answer[0] == 0xAB && answer[1] == 0xCD && answer[2] & 0x81 == 0x81 && answer[3] & 0x80 == 0x80)
        // The client checks for ID 0 (what it sends); parse with the ID set back.
        answer[0] = 0
        answer[1] = 0
        let addresses = try DNSWireMessage.addresses(
            in: answer, for: try HostName("multi.test"), type: .aaaa, source: "test")
        #expect(
            addresses.map(\.ip.description) == ["2001:db8::1", "2001:db8::2"] && addresses.allSatisfy { $0.ttl == 77 })
    }
}
