import Foundation
import TestSupport
import Testing

@testable import HTTPDNS

/// HTTP DNS has one budget across its endpoints and bootstrap addresses, after which the next source is asked.
@Suite("HTTP DNS time budget")
struct TimeBudgetTests {
    static func resolver(_ urls: [String], budget: Duration?, transport: HTTPDNSTransport) throws -> HTTPDNSResolver {
        try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .get), endpoints: try urls.map { try HTTPDNSEndpoint($0) }, budget: budget),
            transport: transport)
    }

    @Test("blackholed endpoints cost the budget, not a connect timeout each, and the error says so")
    func blackholedEndpoints() async throws {
        let first = try BlackholeListener(ip: "127.0.0.66")
        let second = try BlackholeListener(ip: "127.0.0.67")
        defer {
            first.close()
            second.close()
        }
        let transport = try HTTPDNSTransport(configuration: .init(requestTimeout: .seconds(30), connectTimeout: .seconds(30)))
        let urls = ["http://127.0.0.66:\(first.port)/dns-query", "http://127.0.0.67:\(second.port)/dns-query"]
        let doh = try Self.resolver(urls, budget: .milliseconds(300), transport: transport)
        do {
            _ = try await doh.resolve(try HostName("multi.test"), family: .ipv4)
            Issue.record("a blackholed endpoint cannot answer")
        } catch let error as DNSError {
            #expect(error.code == .timeout)
            #expect(error.message.contains("budget"), "\(error)")
            #expect(error.servers == urls)
        }
        await transport.shutdown()
    }

    @Test("a stalling endpoint costs the budget; the pipeline then asks its next source")
    func stallingEndpointThenNextSource() async throws {
        let stalling = try await LocalHTTPServer(host: "127.0.0.68") { _ in .stall }
        let transport = try HTTPDNSTransport(configuration: .init(requestTimeout: .seconds(30), connectTimeout: .seconds(30)))
        try await DNSMasq.with { dnsmasq in
            let doh = try Self.resolver(["http://127.0.0.68:\(stalling.port)/dns-query"], budget: .milliseconds(300), transport: transport)
            let cares = try CAresResolver(options: .init(servers: [dnsmasq.address], timeout: .seconds(5)))
            let resolver = HostResolver(
                upstreams: [.init(name: "doh", kind: .httpDNS, resolver: doh), .init(name: "cares", kind: .cares, resolver: cares)],
                prober: nil, configuration: .init(probing: nil))
            let answer = try await resolver.resolveRanked("multi.test", family: .ipv4)
            #expect(answer.origin == .cares, "the stalled provider gave up within its budget and c-ares answered")
            await resolver.shutdown()
            cares.shutdown()
        }
        await transport.shutdown()
        await stalling.stop()
    }
}
