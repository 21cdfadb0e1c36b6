import Foundation
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// NXDOMAIN and no data never destroy a good answer unless every upstream agrees and is trusted.
@Suite("Negative answers and good ones")
struct NegativeAnswerTests {
    static func cache() -> HostCache {
        HostCache(configuration: .init(minimumTTL: 0, maximumStaleness: .seconds(3600)))
    }

    @Test("NXDOMAIN from one upstream while another fails does not overwrite a stale answer")
    func partialNegativeKeepsStale() async throws {
        try await DNSMasq.with(records: ["host-record=flaky.test,192.0.2.70,1"]) { first in
            try await DNSMasq.with(records: []) { second in
                let a = try CAresResolver(
                    configuration: .init(servers: [first.address], timeout: .seconds(1), tries: 1))
                let b = try CAresResolver(configuration: .init(servers: [second.address], timeout: .seconds(5)))
                let resolver = HostResolver(
                    upstreams: [
                        .init(name: "a", kind: .cares, resolver: a), .init(name: "b", kind: .cares, resolver: b),
                    ],
                    cache: Self.cache(), prober: nil, configuration: .parts(probing: nil))
                #expect(try await resolver.resolveRanked("flaky.test", family: .ipv4).best?.description == "192.0.2.70")
                first.stop()  // a now fails; b says NXDOMAIN
                try await Task.sleep(for: .milliseconds(1200))  // the 1 s TTL passes (real time)
                let stale = try await resolver.resolveRanked("flaky.test", family: .ipv4)
                #expect(stale.freshness == .stale && stale.best?.description == "192.0.2.70")
                await resolver.waitForBackgroundWork()  // the refresh: a fails, b says NXDOMAIN
                let again = try await resolver.resolveRanked("flaky.test", family: .ipv4)
                #expect(again.best?.description == "192.0.2.70", "the good answer survives a partial NXDOMAIN")
                await resolver.shutdown()
                a.shutdown()
                b.shutdown()
            }
        }
    }

    @Test("NXDOMAIN from every upstream replaces the cached answer")
    func unanimousNegativeReplaces() async throws {
        try await DNSMasq.with(records: ["host-record=gone.test,192.0.2.71,1"]) { first in
            try await DNSMasq.with(records: []) { second in
                let a = try CAresResolver(configuration: .init(servers: [first.address], timeout: .seconds(5)))
                let b = try CAresResolver(configuration: .init(servers: [second.address], timeout: .seconds(5)))
                let upstreams: [HostResolver.Upstream] = [
                    .init(name: "a", kind: .cares, resolver: a), .init(name: "b", kind: .cares, resolver: b),
                ]
                let resolver = HostResolver(
                    upstreams: upstreams, cache: Self.cache(), prober: nil, configuration: .parts(probing: nil))
                _ = try await resolver.resolveRanked("gone.test", family: .ipv4)
                // Both now deny it: b always did; a is asked through a resolver that only knows b's zone.
                try await Task.sleep(for: .milliseconds(1200))
                let only = HostResolver(
                    upstreams: [.init(name: "b", kind: .cares, resolver: b)], cache: resolver.cache, prober: nil,
                    configuration: .parts(probing: nil))
                _ = try? await only.resolveRanked("gone.test", family: .ipv4)
                await only.waitForBackgroundWork()
                do {
                    let answer = try await only.resolveRanked("gone.test", family: .ipv4)
                    Issue.record("expected notFound, got \(answer)")
                } catch let error as HTTPDNSError {
                    #expect(error.code == .notFound)
                }
                await resolver.shutdown()
                a.shutdown()
                b.shutdown()
            }
        }
    }

    @Test("an empty vendor answer (throttling) is not cached as negative, and a cached answer wins over it")
    func vendorEmptyAnswer() async throws {
        let throttled = Atomic<Bool>(false)
        let zone = FakeHTTPDNS.alibaba(account: "139450", secret: nil)
        let asked = Atomic<Int>(0)
        try await HTTPDNSAPITests.withServer({ request in
            asked.add(1, ordering: .relaxed)
            guard throttled.load(ordering: .relaxed) else { return zone(request) }
            return .text(
                #"{"host":"\#(request.query["host"] ?? "")","ips":[],"ttl":60}"#, contentType: "application/json")
        }) { server, transport in
            let vendor = try HTTPDNSAPITests.resolver(.alibaba(account: "139450"), server.url, transport: transport)
            let upstream = HostResolver.Upstream(
                name: "alibaba", kind: .httpDNS, resolver: vendor, negativeAnswersAreAuthoritative: false)
            let resolver = HostResolver(
                upstreams: [upstream], cache: Self.cache(), prober: nil, configuration: .parts(probing: nil))
            throttled.store(true, ordering: .relaxed)
            for _ in 0..<2 {
                await #expect(throws: HTTPDNSError.self) {
                    try await resolver.resolveRanked("v4only.test", family: .ipv4)
                }
            }
            #expect(asked.load(ordering: .relaxed) == 2, "asked again: the empty answer was not cached")
            #expect(resolver.cache?.entries().contains { $0.error != nil } == false)

            throttled.store(false, ordering: .relaxed)
            #expect(try await resolver.resolveRanked("multi.test", family: .ipv4).addresses.count == 2)
            throttled.store(true, ordering: .relaxed)
            resolver.networkDidChange()  // every answer due for refresh: the next lookup asks the vendor
            let served = try await resolver.resolveRanked("multi.test", family: .ipv4)
            await resolver.waitForBackgroundWork()
            #expect(served.addresses.count == 2)
            #expect(try await resolver.resolveRanked("multi.test", family: .ipv4).addresses.count == 2, "still served")
            await resolver.shutdown()
        }
    }
}
