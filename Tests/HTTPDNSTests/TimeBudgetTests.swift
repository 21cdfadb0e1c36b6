import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
import HTTPDNSPinnedClients

/// HTTP DNS has one budget across its endpoints and bootstrap addresses, after which the next source is asked.
@Suite("HTTP DNS time budget")
struct TimeBudgetTests {
    static func resolver(_ urls: [String], budget: Duration?, transport: HTTPDNSTransport) throws -> HTTPDNSResolver {
        try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: .get), endpoints: try urls.map { try HTTPDNSEndpoint($0) }, budget: budget),
            transport: transport)
    }

    struct Expired: Error {}

    @Test(
        "the time limit: the value within it, its error past it (the operation cancelled), the caller's cancellation passed on"
    )
    func timeLimit() async throws {
        #expect(try await withTimeLimit(.seconds(60), orThrow: Expired()) { 42 } == 42)
        let cancelled = Locked(false)
        await #expect(throws: Expired.self) {
            try await withTimeLimit(.milliseconds(50), orThrow: Expired()) {
                do { try await Task.sleep(for: .seconds(3600)) } catch { cancelled.withLock { $0 = true }; throw error }
            }
        }
        #expect(cancelled.withLock { $0 }, "the operation is cancelled when the limit passes")
        // The operation's own error is not turned into the time limit's.
        struct Own: Error {}
        await #expect(throws: Own.self) { try await withTimeLimit(.seconds(60), orThrow: Expired()) { throw Own() } }
        // Cancelling the caller cancels the operation, which ends with its own error, not the time limit's.
        let caller = Task {
            try await withTimeLimit(.seconds(3600), orThrow: Expired()) { try await Task.sleep(for: .seconds(3600)) }
        }
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
    }

    @Test("blackholed endpoints cost the budget, not a connect timeout each, and the error says so")
    func blackholedEndpoints() async throws {
        let first = try BlackholeListener(ip: "127.0.0.66")
        let second = try BlackholeListener(ip: "127.0.0.67")
        defer {
            first.close()
            second.close()
        }
        // Connect timeouts far above the budget, yet short enough that shutdown, which waits for the abandoned
        // connects, does not hold the suite for long.
        let transport = try HTTPDNSTransport(
            configuration: .init(requestTimeout: .seconds(5), connectTimeout: .seconds(5)))
        let urls = ["http://127.0.0.66:\(first.port)/dns-query", "http://127.0.0.67:\(second.port)/dns-query"]
        let doh = try Self.resolver(urls, budget: .milliseconds(300), transport: transport)
        do {
            _ = try await doh.resolve(try HostName("multi.test"), family: .ipv4)
            Issue.record("a blackholed endpoint cannot answer")
        } catch let error as HTTPDNSError {
            #expect(error.code == .timeout)
            #expect(error.message.contains("budget"), "\(error)")
            #expect(error.servers == urls)
        }
        await transport.shutdown()
    }

    @Test("a stalling endpoint costs the budget; the pipeline then asks its next source")
    func stallingEndpointThenNextSource() async throws {
        let stalling = try await LocalHTTPServer(host: "127.0.0.68") { _ in .stall }
        // Connect timeouts far above the budget, yet short enough that shutdown, which waits for the abandoned
        // connects, does not hold the suite for long.
        let transport = try HTTPDNSTransport(
            configuration: .init(requestTimeout: .seconds(5), connectTimeout: .seconds(5)))
        try await DNSMasq.with { dnsmasq in
            let doh = try Self.resolver(
                ["http://127.0.0.68:\(stalling.port)/dns-query"], budget: .milliseconds(300), transport: transport)
            let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(5)))
            let resolver = HostResolver(
                upstreams: [
                    .init(name: "doh", kind: .httpDNS, resolver: doh),
                    .init(name: "cares", kind: .cares, resolver: cares),
                ],
                prober: nil, configuration: .parts(probing: nil))
            let answer = try await resolver.resolveRanked("multi.test", family: .ipv4)
            #expect(answer.origin == .cares, "the stalled provider gave up within its budget and c-ares answered")
            await resolver.shutdown()
            cares.shutdown()
        }
        await transport.shutdown()
        await stalling.stop()
    }
}
