import InMemoryTracing
import Logging
import TestSupport
import Testing
import Tracing

@testable import HTTPDNS
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// The server span each request gets when the service has a tracer (what `hostsctl serve` exports over OTLP), seen
/// in memory over real UDP sockets.
@Suite("HTTP DNS server: a span per request")
struct ServiceSpanTests {
    static let logger = Logger(label: "service-span-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Answers every name with 192.0.2.7 after a short wait: a cache miss the request waits for.
    struct SlowUpstream: HostNameResolver {
        func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
            try await Task.sleep(for: .milliseconds(20))
            return Resolution(
                host: host.name,
                addresses: family == .ipv6
                    ? [] : [ResolvedAddress(ip: IPAddress(ipv4: 192, 0, 2, 7), ttl: 300, source: .cares)])
        }
    }

    @Test("each answer's span: transport, name, status, outcome, cache hit or miss, the client's network only")
    func spans() async throws {
        let tracer = InMemoryTracer()
        let overrides = HostOverrides()
        overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: SlowUpstream())], overrides: overrides,
            cache: HostCache(), prober: nil)
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(), logger: Self.logger, tracer: tracer)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
            logger: Self.logger)
        try await withCleanup { () async throws in
            let port = try #require(server.dnsPort)
            let client = "127.0.0.152"
            let fast = try await DNSTransportTests.udp(port, DNSTransportTests.query("fast.test", id: 1), from: client)
            #expect(try DNSTransportTests.addresses(try #require(fast), "fast.test") == ["127.0.0.5"])
            let slow = try await DNSTransportTests.udp(port, DNSTransportTests.query("slow.test", id: 2), from: client)
            #expect(try DNSTransportTests.addresses(try #require(slow), "slow.test") == ["192.0.2.7"])
            // The span is made as the answer goes out: by now both are in.
            #expect(try await waitUntil { tracer.finishedSpans.count >= 2 })

            let spans = tracer.finishedSpans
            func span(_ name: String) -> FinishedInMemorySpan? {
                spans.first { $0.attributes.get("dns.question.name") == .string(name) }
            }
            let hit = try #require(span("fast.test"), "\(spans.map(\.attributes))")
            #expect(hit.kind == .server)
            #expect(hit.operationName == "dns-query")
            #expect(hit.attributes.get("dns.transport") == .string("udp"))
            #expect(hit.attributes.get("http.response.status_code") == .int64(200))
            #expect(hit.attributes.get("dns.outcome") == .string("answered"))
            #expect(hit.attributes.get("dns.cache") == .string("hit"), "an override answers at once")
            #expect(hit.attributes.get("client.network") == .string("127.0.0.0/24"))
            #expect(hit.endInstant.nanosecondsSinceEpoch >= hit.startInstant.nanosecondsSinceEpoch)
            let miss = try #require(span("slow.test"))
            #expect(miss.attributes.get("dns.cache") == .string("miss"), "the answer waited for the upstream")
            // It started when the request arrived, before the upstream's 20 ms.
            #expect(miss.endInstant.nanosecondsSinceEpoch - miss.startInstant.nanosecondsSinceEpoch >= 20_000_000)
            // The client's address is in no span, only its network.
            for span in spans {
                var text = ""
                span.attributes.forEach { key, value in text += "\(key)=\(value) " }
                #expect(!text.contains(client), "\(text)")
            }
        } cleanup: {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
        }
    }

    @Test("the client network is cut to /24 or /48 at most, or to the configured prefix when that is shorter")
    func network() throws {
        let v4 = try #require(IPAddress("203.0.113.77"))
        let v6 = try #require(IPAddress("2001:db8:1:2:3::9"))
        #expect(ServiceSpan.network(of: v4, prefixes: ClientPrefixes()) == "203.0.113.0/24")
        #expect(ServiceSpan.network(of: v4, prefixes: ClientPrefixes(ipv4: 16)) == "203.0.0.0/16")
        #expect(ServiceSpan.network(of: v6, prefixes: ClientPrefixes()) == "2001:db8:1::/48")
        #expect(ServiceSpan.network(of: v6, prefixes: ClientPrefixes(ipv6: 32)) == "2001:db8::/32")
        #expect(ServiceSpan.network(of: nil, prefixes: ClientPrefixes()) == nil)
    }
}
