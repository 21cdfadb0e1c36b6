import Foundation
import Glibc
import Logging
import Prometheus
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// What an operator relies on: per-client rate limits, other query types forwarded to c-ares, Prometheus metrics,
/// access logs without full client addresses, configuration applied while serving, and a client other than ours.
@Suite("HTTP DNS server operations")
struct OperationsTests {
    static let logger = Logger(label: "operations-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A resolver on a fresh dnsmasq (the test zone plus a TXT record) and a c-ares forwarder to it.
    struct Pipeline {
        let dnsmasq: DNSMasq
        let cares: CAresResolver
        let resolver: HostResolver

        static func start() async throws -> Pipeline {
            let dnsmasq = try await DNSMasq.start(
                records: TestZone.records + [#"txt-record=info.test,"hello from dnsmasq""#])
            let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(2)))
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], cache: HostCache(), prober: nil)
            return Pipeline(dnsmasq: dnsmasq, cares: cares, resolver: resolver)
        }

        func stop() async {
            await resolver.shutdown()
            cares.shutdown()
            dnsmasq.stop()
        }
    }

    /// An RFC 8484 GET for `name` and record type `type` (any number: 16 is TXT), with query ID `id`.
    static func dohGET(_ name: String, type: UInt16, id: UInt16 = 0) throws -> ServiceRequest {
        var query: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xFF), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") { query += [UInt8(label.utf8.count)] + Array(label.utf8) }
        query += [0, UInt8(type >> 8), UInt8(type & 0xFF), 0, 1]
        let encoded = Data(query).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return ServiceRequest(method: "GET", target: "/dns-query?dns=\(encoded)")
    }

    @Test(
        "rate limits: each client network gets its own bucket, 429 with Retry-After past it, health checks exempt, a reload lifts it"
    )
    func rateLimits() async throws {
        let pipeline = try await Pipeline.start()
        let service = HTTPDNSService(
            resolver: pipeline.resolver, configuration: .init(rateLimitPerSecond: 0.001, rateLimitBurst: 3),
            logger: Self.logger, metricsExporter: { Array("up 1\n".utf8) })
        var request = ServiceRequest(method: "GET", target: "/resolve?name=multi.test", client: IPAddress("127.0.0.9"))
        var statuses: [Int] = []
        for _ in 0..<4 { statuses.append(await service.handle(request).status) }
        #expect(statuses == [200, 200, 200, 429])
        let limited = await service.handle(request)
        #expect(limited.status == 429 && Int(limited.headers["Retry-After"] ?? "") ?? 0 >= 1)
        // Health checks from the same client are never limited.
        #expect(
            await service.handle(ServiceRequest(method: "GET", target: "/healthz", client: request.client)).status
                == 200)
        // Another address of the same /24 is the same client (the default unit), another /24 another; IPv6
        // addresses in one /48 are one client, another /48 another.
        request.client = IPAddress("127.0.0.10")
        #expect(await service.handle(request).status == 429, "the same /24")
        request.client = IPAddress("127.0.1.10")
        #expect(await service.handle(request).status == 200)
        var v6 = ServiceRequest(method: "GET", target: "/resolve?name=multi.test", client: IPAddress("2001:db8::1"))
        for _ in 0..<3 { _ = await service.handle(v6) }
        v6.client = IPAddress("2001:db8::ffff")
        #expect(await service.handle(v6).status == 429)
        v6.client = IPAddress("2001:db8:0:100::1")
        #expect(await service.handle(v6).status == 429, "another /56 of the same /48")
        v6.client = IPAddress("2001:db8:1::1")
        #expect(await service.handle(v6).status == 200, "another /48")
        // /metrics answers on the admin listener only, and is never limited there (the operator's scraper); on the
        // public listener it is no endpoint at all.
        #expect(
            await service.handle(ServiceRequest(method: "GET", target: "/metrics", client: IPAddress("127.0.0.9")))
                .status == 404)
        #expect(
            await service.handle(
                ServiceRequest(method: "GET", target: "/metrics", client: IPAddress("127.0.0.9"), listener: .admin)
            ).status == 200)
        // Settings applied while serving lift the limit.
        service.apply(.init(rateLimitPerSecond: 0))
        request.client = IPAddress("127.0.0.9")
        #expect(await service.handle(request).status == 200)
        await pipeline.stop()
    }

    @Test("the limiter's table is bounded, and a flood of client networks never makes a quiet client share a bucket")
    func boundedLimiter() throws {
        let limiter = RateLimiter(limits: .init(perSecond: 0.001, burst: 2), maximumClients: 100)
        let quiet = IPAddress("192.0.2.1")
        #expect(limiter.admit(quiet) == nil)
        for index in 0..<10_000 {
            _ = limiter.admit(IPAddress(ipv4: 10, UInt8(index / 256), UInt8(index % 256), 1))
        }
        #expect(limiter.trackedClients <= 100)
        // The quiet client has at most lost its bucket (and starts again with a full one): it is not refused.
        #expect(limiter.admit(quiet) == nil, "a well-behaved client is not refused because of a flood")
        // The flooding networks themselves are still limited while their buckets are kept.
        let flooder = IPAddress(ipv4: 10, 0, 0, 9)
        _ = limiter.admit(flooder)
        _ = limiter.admit(flooder)
        #expect(limiter.admit(flooder) != nil)
    }

    @Test("clients are counted by network: an IPv4 /24 (mapped or not), an IPv6 /48 by default, prefixes set")
    func clientNetworks() throws {
        func network(_ text: String, _ prefixes: ClientPrefixes = ClientPrefixes()) throws -> ClientNetwork {
            ClientNetwork(IPAddress(text), prefixes: prefixes)
        }
        #expect(try network("192.0.2.7") == network("::ffff:192.0.2.7"))
        #expect(try network("192.0.2.7") == network("192.0.2.8"), "one /24")
        #expect(try network("::ffff:192.0.2.7") != network("::ffff:192.0.3.8"))
        #expect(try network("2001:db8:1:2::1") == network("2001:db8:1:2:ffff::9"))
        #expect(try network("2001:db8:1:2::1") == network("2001:db8:1:ff02::1"), "one /48")
        #expect(try network("2001:db8:1:2::1") != network("2001:db8:2:2::1"), "another /48")
        let old = ClientPrefixes(ipv4: 32, ipv6: 56)
        #expect(try network("192.0.2.7", old) != network("192.0.2.8", old))
        #expect(try network("2001:db8:1:2::1", old) != network("2001:db8:1:102::1", old), "another /56")
        let wide = ClientPrefixes(ipv4: 24, ipv6: 48)
        #expect(try network("2001:db8:1:2::1", wide) == network("2001:db8:1:ff02::1", wide), "one /48")
        #expect(try network("2001:db8:1:2::1", wide) != network("2001:db8:2:2::1", wide))
        #expect(try network("192.0.2.7", wide) == network("192.0.2.200", wide), "one /24")
        let narrow = ClientPrefixes(ipv4: 32, ipv6: 128)
        #expect(try network("2001:db8::1", narrow) != network("2001:db8::2", narrow))
        #expect(ClientNetwork(nil) == .shared)
        // The limiter keeps two mapped IPv4 clients apart, as it does unmapped ones.
        let limiter = RateLimiter(limits: .init(perSecond: 0.001, burst: 1))
        #expect(limiter.admit(IPAddress("::ffff:192.0.2.7")) == nil)
        #expect(limiter.admit(IPAddress("::ffff:192.0.3.8")) == nil)
        #expect(limiter.admit(IPAddress("192.0.2.7")) != nil, "the same client as ::ffff:192.0.2.7")
        // Many addresses of one /48 share one bucket.
        #expect(limiter.admit(IPAddress("2001:db8:7:1::1")) == nil)
        #expect(limiter.admit(IPAddress("2001:db8:7:ff02::99")) != nil, "the same /48")
    }

    @Test("over a real connection the limit applies to the connection's peer address")
    func rateLimitOnTheWire() async throws {
        let pipeline = try await Pipeline.start()
        let service = HTTPDNSService(
            resolver: pipeline.resolver, configuration: .init(rateLimitPerSecond: 0.001, rateLimitBurst: 1),
            logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service, configuration: .init(port: 0, idleTimeout: TestTiming.scaled(.milliseconds(500))),
            logger: Self.logger)
        let one = "GET /resolve?name=multi.test HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        let reply = try await HTTPDNSServerTests.exchange(port: server.port, Array((one + one).utf8))
        #expect(reply.reply.components(separatedBy: "HTTP/1.1 200").count == 2, "\(reply.reply.prefix(200))")
        #expect(reply.reply.contains("HTTP/1.1 429") && reply.reply.lowercased().contains("retry-after: "))
        await server.shutdown(grace: .milliseconds(100))
        await pipeline.stop()
    }

    @Test("other record types: NOTIMP by default, relayed from c-ares with the client's ID when forwarding is on")
    func otherTypes() async throws {
        let pipeline = try await Pipeline.start()
        let service = HTTPDNSService(
            resolver: pipeline.resolver, configuration: .init(), logger: Self.logger,
            forwarder: CAresForwarder(resolver: pipeline.cares))
        let txt = try Self.dohGET("info.test", type: 16, id: 0x4242)
        let refused = await service.handle(txt)
        #expect(refused.status == 200 && refused.body.count >= 12)
        #expect(refused.body[3] & 0x0F == 4, "NOTIMP")
        service.apply(.init(otherTypes: .forward))
        let forwarded = await service.handle(txt)
        #expect(forwarded.status == 200 && forwarded.contentType == "application/dns-message")
        #expect(forwarded.body[0] == 0x42 && forwarded.body[1] == 0x42, "the client's ID")
        #expect(forwarded.body[3] & 0x0F == 0 && forwarded.body[6] == 0 && forwarded.body[7] == 1, "one answer")
        #expect(String(decoding: forwarded.body, as: UTF8.self).contains("hello from dnsmasq"))
        // A name that does not exist comes back as dnsmasq said it: NXDOMAIN.
        let missing = await service.handle(try Self.dohGET("nothing.test", type: 16))
        #expect(missing.body[3] & 0x0F == 3)
        await pipeline.stop()
    }

    @Test("metrics: requests by endpoint and status and rate-limited requests in Prometheus format on /metrics")
    func metrics() async throws {
        let pipeline = try await Pipeline.start()
        let registry = PrometheusCollectorRegistry()
        let service = HTTPDNSService(
            resolver: pipeline.resolver, configuration: .init(rateLimitPerSecond: 0.001, rateLimitBurst: 2),
            logger: Self.logger, metricsFactory: PrometheusMetricsFactory(registry: registry),
            metricsExporter: { registry.emitToBuffer() })
        let request = try Self.dohGET("multi.test", type: 1)
        for _ in 0..<3 { _ = await service.handle(request) }
        _ = await service.handle(ServiceRequest(method: "GET", target: "/nowhere"))
        // The operator's scraper comes from another address than the limited client.
        let exposed = await service.handle(
            ServiceRequest(method: "GET", target: "/metrics", client: IPAddress("127.0.0.200"), listener: .admin))
        let text = String(decoding: exposed.body, as: UTF8.self)
        #expect(exposed.status == 200 && exposed.contentType.hasPrefix("text/plain; version=0.0.4"))
        #expect(text.contains(#"httpdns_serve_requests_total{endpoint="dns-query",status="200"} 2"#), "\(text)")
        #expect(text.contains(#"httpdns_serve_requests_total{endpoint="dns-query",status="429"} 1"#))
        #expect(text.contains(#"httpdns_serve_requests_total{endpoint="unknown",status="404"} 1"#))
        #expect(text.contains("httpdns_serve_rate_limited_total 1"))
        #expect(text.contains("httpdns_serve_request_duration_seconds"))
        // By transport: the four requests before /metrics came over plain HTTP (/metrics is counted after it renders).
        #expect(text.contains(#"httpdns_serve_queries_total{transport="http"} 4"#), "\(text)")
        #expect(text.contains(#"httpdns_serve_queries_total{transport="udp"} 0"#))
        // Rendered at most once a second: asked again at once, the same text comes back.
        _ = await service.handle(request)
        let again = await service.handle(
            ServiceRequest(method: "GET", target: "/metrics", client: IPAddress("127.0.0.201"), listener: .admin))
        #expect(again.body == exposed.body)
        // Without an exporter there is no /metrics.
        let bare = HTTPDNSService(resolver: pipeline.resolver, logger: Self.logger)
        #expect(await bare.handle(ServiceRequest(method: "GET", target: "/metrics", listener: .admin)).status == 404)
        // The admin listener answers nothing but the operator's endpoints and the health checks.
        #expect(await service.handle(ServiceRequest(method: "GET", target: "/healthz", listener: .admin)).status == 200)
        var onAdmin = request
        onAdmin.listener = .admin
        #expect(await service.handle(onAdmin).status == 404)
        await pipeline.stop()
    }

    @Test("access logs: one line per request with endpoint, status and name, the client as its network, no signature")
    func accessLogs() async throws {
        let pipeline = try await Pipeline.start()
        let lines = RecordedLog()
        var logger = Logger(label: "access", factory: { _ in lines })
        logger.logLevel = .info
        let service = HTTPDNSService(
            resolver: pipeline.resolver,
            configuration: .init(accounts: ["signed-1": HTTPDNSSecret("s3cret")], publicEndpoints: .on), logger: logger)
        _ = await service.handle(
            ServiceRequest(method: "GET", target: "/resolve?name=multi.test", client: IPAddress("198.51.100.23")))
        _ = await service.handle(
            ServiceRequest(
                method: "GET", target: "/signed-1/sign_d?host=multi.test&t=9999999999&s=deadbeef",
                client: IPAddress("2001:db8:1:2::99")))
        let entries = lines.entries
        #expect(entries.count == 2)
        #expect(entries.first?["endpoint"] == "resolve" && entries.first?["status"] == "200")
        #expect(entries.first?["name"] == "multi.test" && entries.first?["client"] == "198.51.100.0/24")
        #expect(entries.last?["endpoint"] == "alibaba" && entries.last?["status"] == "403")
        #expect(entries.last?["client"] == "2001:db8:1::/48")
        let everything = entries.map { $0.values.joined(separator: " ") }.joined(separator: "\n")
        #expect(!everything.contains("deadbeef") && !everything.contains("s3cret") && !everything.contains("::99"))
        await pipeline.stop()
    }

    @Test(
        "client reports (off by default) come from trusted networks or signed over their body, once, and move an address only as the median of several networks (/24s, not addresses)"
    )
    func clientReports() async throws {
        let pipeline = try await Pipeline.start()
        let closed = HTTPDNSService(resolver: pipeline.resolver, logger: Self.logger)
        let body = Array(#"{"host":"multi.test","ip":"192.0.2.1","failed":true}"#.utf8)
        #expect(await closed.handle(ServiceRequest(method: "POST", target: "/report", body: body)).status == 404)
        let clock = Locked<Int64>(1_700_000_000)
        let service = HTTPDNSService(
            resolver: pipeline.resolver,
            configuration: .init(
                accounts: ["signed-1": HTTPDNSSecret("s3cret")], acceptClientReports: true,
                reportNetworks: [IPNetwork("10.0.0.0/8")!], publicEndpoints: .on),
            logger: Self.logger, now: { clock.withLock { $0 } })
        func first() async -> String? {
            let answer = await service.handle(ServiceRequest(method: "GET", target: "/resolve?name=multi.test"))
            let text = String(decoding: answer.body, as: UTF8.self)
            return text.range(of: #""data":""#).map { String(text[$0.upperBound...].prefix { $0 != "\"" }) }
        }
        let initial = await first()  // the answer is now cached: 192.0.2.1 and 192.0.2.2
        #expect(initial != nil)
        func report(_ json: String, from client: String, query: String = "") async -> Int {
            await service.handle(
                ServiceRequest(
                    method: "POST", target: "/report" + query, body: Array(json.utf8), client: IPAddress(client))
            ).status
        }
        let fail1 = #"{"host":"multi.test","ip":"192.0.2.1","failed":true}"#
        let fast2 = #"{"host":"multi.test","ip":"192.0.2.2","connectMs":0}"#
        // An untrusted, unsigned client is refused; a wrong signature too.
        #expect(await report(fail1, from: "198.51.100.7") == 403)
        #expect(await report(fail1, from: "198.51.100.7", query: "?account=signed-1&t=1700000300&s=00") == 403)
        #expect(await report(fail1, from: "198.51.100.7", query: "?account=nobody&t=1700000300&s=00") == 403)
        // One trusted client, however often it reports, moves nothing; nor do many addresses of its /24.
        for index in 0..<50 {
            #expect(await report(fail1, from: "10.1.0.\(index % 5 + 1)") == 204)
            #expect(await report(fast2, from: "10.1.0.\(index % 5 + 1)") == 204)
        }
        #expect(await first() == initial, "one client network alone changes no ranking")
        // A signature is bound to the body, the account and a short window, and is taken once: the sign_d
        // signature of the host (which anyone who saw a signed URL has), another body's, an expiry too far ahead
        // and a replay are refused.
        func signed(_ body: String, expiry: Int64 = 1_700_000_030) -> String {
            let signature = ReportSignature.sign(
                account: "signed-1", expiry: expiry, body: Array(body.utf8), secret: "s3cret")
            return "?account=signed-1&t=\(expiry)&s=\(signature)"
        }
        let hostSignature = AlibabaHTTPDNS.signature(host: "multi.test", secret: "s3cret", expiry: 1_700_000_030)
        let hostSigned = "?account=signed-1&t=1700000030&s=\(hostSignature)"
        #expect(await report(fail1, from: "198.51.100.7", query: hostSigned) == 403, "the host's sign_d signature")
        #expect(await report(fail1, from: "198.51.100.7", query: signed(fast2)) == 403, "another body's signature")
        #expect(await report(fail1, from: "198.51.100.7", query: signed(fail1, expiry: 1_700_000_600)) == 403)
        #expect(await report(fail1, from: "198.51.100.7", query: signed(fail1, expiry: 1_699_999_999)) == 403)
        // Two more networks agreeing make three: now the failing address drops below the measured one.
        #expect(await report(fail1, from: "198.51.100.7", query: signed(fail1)) == 204)
        #expect(await report(fail1, from: "198.51.100.7", query: signed(fail1)) == 403, "a replay is refused")
        #expect(await report(fast2, from: "198.51.100.7", query: signed(fast2)) == 204)
        #expect(await report(fail1, from: "10.2.0.1") == 204)
        #expect(await report(fast2, from: "10.2.0.1") == 204)
        #expect(await first() == "192.0.2.2", "the failed address drops below the measured one")
        // Addresses the server did not answer for that host, and malformed reports, are refused.
        #expect(await report(#"{"host":"multi.test","ip":"203.0.113.9","connectMs":1}"#, from: "10.1.0.1") == 404)
        #expect(await report(#"{"host":"v4only.test","ip":"192.0.2.1","connectMs":1}"#, from: "10.1.0.1") == 404)
        #expect(await report(#"{"host":"multi.test","ip":"192.0.2.2","connectMs":-1}"#, from: "10.1.0.1") == 400)
        #expect(await report("not json", from: "10.1.0.1") == 400)
        let get = await service.handle(ServiceRequest(method: "GET", target: "/report"))
        #expect(get.status == 405 && get.headers["Allow"] == "POST")
        await pipeline.stop()
    }

    @Test("reports are weighed: the median of the networks that reported within the window, failures by majority")
    func reportAggregation() throws {
        let aggregator = ReportAggregator(limits: .init(window: .seconds(300), minimumNetworks: 3))
        let address = IPAddress(ipv4: 192, 0, 2, 9)
        let start = ContinuousClock.now
        func network(_ n: UInt8) -> ClientNetwork { ClientNetwork(IPAddress(ipv4: 10, n, 0, 1)) }
        #expect(
            aggregator.record(host: "a.test", address: address, network: network(1), connect: .zero, now: start) == nil)
        #expect(
            aggregator.record(
                host: "a.test", address: address, network: network(2), connect: .milliseconds(30), now: start)
                == nil)
        #expect(
            aggregator.record(
                host: "a.test", address: address, network: network(3), connect: .milliseconds(40), now: start)
                == .connect(.milliseconds(30)), "the median, not the liar's 0 ms")
        #expect(
            aggregator.record(host: "a.test", address: address, network: network(1), connect: nil, now: start)
                != .failure)
        #expect(
            aggregator.record(host: "a.test", address: address, network: network(2), connect: nil, now: start)
                == .failure, "two of three networks failed")
        // Reports older than the window no longer count.
        #expect(
            aggregator.record(
                host: "a.test", address: address, network: network(4), connect: .milliseconds(5),
                now: start + .seconds(400)) == nil)
    }

    @Test("a client that is not ours: a Python RFC 8484 wire client gets the answer over HTTP/1.1 POST")
    func pythonClient() async throws {
        let pipeline = try await Pipeline.start()
        let service = HTTPDNSService(resolver: pipeline.resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(service: service, configuration: .init(port: 0), logger: Self.logger)
        let script = """
            import http.client, struct, sys
            name = sys.argv[2]
            qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0"
            query = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 1, 1)
            c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=float(sys.argv[3]))
            c.request("POST", "/dns-query", body=query,
                      headers={"Content-Type": "application/dns-message", "Accept": "application/dns-message"})
            r = c.getresponse()
            body = r.read()
            ident, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", body[:12])
            assert r.status == 200 and ident == 0x1234 and flags & 0x8000, (r.status, ident, flags)
            offset = 12 + len(qname) + 4
            out = []
            for _ in range(an):
                if body[offset] & 0xC0 == 0xC0:
                    offset += 2
                else:
                    while body[offset]:
                        offset += body[offset] + 1
                    offset += 1
                rtype, rclass, ttl, length = struct.unpack(">HHIH", body[offset:offset + 10])
                offset += 10
                if rtype == 1:
                    out.append(".".join(str(b) for b in body[offset:offset + 4]))
                offset += length
            print(" ".join(sorted(out)))
            """
        let path = try TemporaryFiles.file(script, name: "doh_client.py")
        let run = try await HostsCTLProcess.run(
            executable: "/usr/bin/python3",
            [path, "\(server.port)", "multi.test", "\(Int(TestTiming.scaled(.seconds(30)).components.seconds))"])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "192.0.2.1 192.0.2.2")
        await server.shutdown(grace: .milliseconds(100))
        await pipeline.stop()
    }
}

/// A log handler that keeps each entry's metadata (as strings) for assertions.
final class RecordedLog: LogHandler, Sendable {
    private let lines = Locked<[[String: String]]>([])

    var entries: [[String: String]] { lines.withLock { $0 } }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(event: LogEvent) {
        let values = (event.metadata ?? [:]).mapValues { "\($0)" }
        lines.withLock { $0.append(values) }
    }
}
