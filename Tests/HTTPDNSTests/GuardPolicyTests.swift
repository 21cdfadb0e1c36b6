import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSSettings
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// The private-address guard: which addresses it rejects, and that a rejection ends the lookup instead of being
/// papered over by the next upstream, in ordered and race modes.
@Suite("Private-address guard policy")
struct GuardPolicyTests {
    @Test(
        "scopes of special ranges, IPv4 embedded in IPv6 included",
        arguments: [
            ("10.0.0.1", AddressScope.privateNetwork), ("192.0.2.1", .global), ("192.0.0.8", .reserved),
            ("198.18.0.1", .reserved), ("198.19.255.255", .reserved), ("198.20.0.1", .global), ("240.0.0.1", .reserved),
            ("255.255.255.255", .multicast), ("::ffff:10.1.2.3", .privateNetwork), ("::10.1.2.3", .privateNetwork),
            ("::127.0.0.1", .loopback), ("64:ff9b::10.0.0.1", .privateNetwork), ("64:ff9b::192.0.2.1", .global),
            ("64:ff9b::127.0.0.1", .loopback), ("2002:c0a8:0101::1", .privateNetwork), ("2002:7f00:0001::1", .loopback),
            ("2002:c000:0201::1", .global), ("fec0::1", .privateNetwork), ("fc00::1", .privateNetwork),
            ("2001:db8::1", .global), ("::", .unspecified), ("::1", .loopback),
        ]
    )
    func scopes(address: String, scope: AddressScope) throws {
        let ip = try #require(IPAddress(address))
        #expect(ip.scope == scope)
        #expect(ip.isNonPublic == (scope != .global))
    }

    /// DoH through dnsdist to the usual zone (`n5.test` is the private 10.1.0.5) first, then c-ares to a second
    /// dnsmasq that answers `n5.test` with a public address.
    static func withTwoUpstreams(
        race: Bool, _ body: (HostResolver) async throws -> Void
    ) async throws {
        try await DoHResolverTests.withDoH { _, dnsdist, transport in
            try await DNSMasq.with(records: ["host-record=n5.test,192.0.2.99,300", "host-record=n6.test,10.9.9.9,300"])
            { other in
                let doh = try DoHResolverTests.doh(dnsdist.httpURL, transport: transport)
                let cares = try CAresResolver(configuration: .init(servers: [other.address], timeout: .seconds(5)))
                let resolver = HostResolver(
                    upstreams: [
                        .init(name: "doh", kind: .httpDNS, resolver: doh),
                        .init(name: "cares", kind: .cares, resolver: cares),
                    ],
                    prober: nil,
                    configuration: .parts(race: race, probing: nil)
                )
                try await body(resolver)
                await resolver.shutdown()
                cares.shutdown()
            }
        }
    }

    @Test("ordered: an answer the guard rejects ends the lookup; the next upstream's answer does not replace it")
    func orderedRejectionIsFinal() async throws {
        try await Self.withTwoUpstreams(race: false) { resolver in
            await expectDNSError(.privateAddress) { try await resolver.resolve(try HostName("n5.test"), family: .ipv4) }
            let n5 = try HostName("n5.test")
            #expect(resolver.cache?.rankedAddresses(for: n5, family: .ipv4).isEmpty == true)
            #expect(
                try await resolver.resolveRanked("multi.test", family: .ipv4).origin == "doh",
                "public answers still flow")
        }
    }

    @Test("race: a rejected answer is never served, stored or merged")
    func raceNeverMergesRejected() async throws {
        try await Self.withTwoUpstreams(race: true) { resolver in
            resolver.updatePolicy { $0.guardsEveryUpstream = true }
            for _ in 0..<3 {
                // c-ares answers n6.test with a private address: rejected whether it comes first or second.
                let answer = try? await resolver.resolveRanked("n6.test", family: .ipv4)
                #expect(answer.map { $0.addresses.allSatisfy { !$0.ip.isNonPublic } } ?? true)
                await resolver.waitForBackgroundWork()
                let cached = resolver.cache?.rankedAddresses(for: try HostName("n6.test"), family: .ipv4) ?? []
                #expect(cached.allSatisfy { !$0.ip.isNonPublic }, "\(cached)")
                resolver.cache?.remove(try HostName("n6.test"))
            }
        }
    }

    @Test("guard.everyUpstream extends the guard to c-ares; off by default")
    func everyUpstream() async throws {
        try await DNSMasq.with { server in
            var settings = HostResolver.Configuration.default
            settings.cares.servers = [server.address]
            settings.sources = [.cares]
            settings.systemFallback = false
            settings.probeEnabled = false
            settings.cares.searchDomains = []
            let open = try HostResolver(configuration: settings, persistingCache: false)
            #expect(try await open.resolveRanked("n5.test", family: .ipv4).best?.description == "10.1.0.5")
            await open.shutdown()
            let file = try TemporaryFiles()
            let path = try file.write("s.json", #"{"guard": {"everyUpstream": true}}"#)
            settings.guardsEveryUpstream = try SettingsFile.load(path: path, environment: [:]).get().resolver
                .guardsEveryUpstream
            let guarded = try HostResolver(configuration: settings, persistingCache: false)
            await expectDNSError(.privateAddress) { try await guarded.resolve(try HostName("n5.test"), family: .ipv4) }
            #expect(try await guarded.resolveRanked("multi.test", family: .ipv4).origin == .cares)
            await guarded.shutdown()
        }
    }
}

extension GuardPolicyTests {
    @Test("a cache file written without the guard: a guarded resolver loading it drops the answers the guard withholds")
    func guardedLoad() async throws {
        let files = try TemporaryFiles()
        let path = files.path("cache.json")
        // The addresses are only data: nothing connects to them.
        let upstream = FakeUpstream(
            .answer(["inside.test": ["10.0.0.7"], "outside.test": ["93.184.216.34"]], ttl: 600))
        let writer = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)], prober: nil,
            configuration: .parts(probing: nil, cachePath: path))
        #expect(try await writer.resolveRanked("inside.test", family: .ipv4).best == IPAddress("10.0.0.7"))
        #expect(try await writer.resolveRanked("outside.test", family: .ipv4).best == IPAddress("93.184.216.34"))
        await writer.shutdown()
        // Without the guard the file is served whole.
        let unguarded = HostResolver(
            upstreams: [], prober: nil, configuration: .parts(probing: nil, cachePath: path, saveInterval: .zero))
        #expect(try unguarded.cachedRanked("inside.test", family: .ipv4)?.best == IPAddress("10.0.0.7"))
        await unguarded.shutdown()
        var guarded = HostResolver.Configuration.parts(probing: nil, cachePath: path)
        guarded.guardsEveryUpstream = true
        let reader = HostResolver(upstreams: [], prober: nil, configuration: guarded)
        #expect(try reader.cachedRanked("outside.test", family: .ipv4)?.best == IPAddress("93.184.216.34"))
        #expect(try reader.cachedRanked("inside.test", family: .ipv4) == nil, "the guard's answer is not served")
        await reader.shutdown()
    }
}
