import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSSettings
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
import HTTPDNSPinnedClients

/// NAT64 prefixes (RFC 6052), their discovery (RFC 7050) and the answers a host without an IPv4 route gets. The
/// IPv6-only lab (`NAT64LabTests`) runs the same through tayga, unbound's dns64 module and both fronts.
@Suite("NAT64 synthesis")
struct NAT64Tests {
    @Test(
        "RFC 6052 section 2.4: 192.0.2.33 under each prefix length, and back",
        arguments: [
            ("2001:db8::/32", "2001:db8:c000:221::"), ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
            ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"), ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
            ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
            ("2001:db8:122:344::/96", "2001:db8:122:344::c000:221"), ("64:ff9b::/96", "64:ff9b::c000:221"),
        ])
    func rfc6052(prefix: String, expected: String) throws {
        let nat64 = try #require(NAT64Prefix(prefix))
        let ipv4 = IPAddress(ipv4: 192, 0, 2, 33)
        let synthesized = try #require(nat64.synthesize(ipv4))
        #expect(synthesized == IPAddress(expected))
        #expect(nat64.embedded(in: synthesized) == ipv4)
        #expect(nat64.embedded(in: try #require(IPAddress("2001:db9::1"))) == nil, "outside the prefix")
    }

    @Test("prefixes RFC 6052 does not allow are refused", arguments: ["64:ff9b::/95", "192.0.2.0/24", "64:ff9b::/128"])
    func badPrefixes(text: String) {
        #expect(NAT64Prefix(text) == nil)
    }

    @Test("RFC 7050 discovery: the well-known addresses found embedded at any length; anything else reveals nothing")
    func discovery() throws {
        let wellKnown = ["64:ff9b::c000:aa", "64:ff9b::c000:ab"].compactMap(IPAddress.init)
        #expect(NAT64Prefix.discovered(in: wellKnown) == [NAT64Prefix.wellKnown])
        let sixtyFour = try #require(NAT64Prefix("2001:db8:122:344::/64")?.synthesize(IPAddress(ipv4: 192, 0, 0, 171)))
        #expect(NAT64Prefix.discovered(in: [sixtyFour]).map(\.description) == ["2001:db8:122:344::/64"])
        #expect(NAT64Prefix.discovered(in: [try #require(IPAddress("2001:db8::1"))]).isEmpty, "not a DNS64")
        #expect(NAT64Prefix.discovered(in: [try #require(IPAddress("64:ff9b::c000:201"))]).isEmpty, "not 192.0.0.170")
    }

    /// An answer of `host` with `addresses`, ranked as given.
    static func answer(_ addresses: [String], host: String = "api.test") -> RankedResolution {
        RankedResolution(
            host: host, family: .any,
            addresses: addresses.enumerated().map { index, text in
                RankedAddress(
                    ip: IPAddress(text)!, rank: index + 1, score: 250, latencyMilliseconds: nil, successes: 0,
                    failures: 0)
            },
            origin: "doh", ttl: 60, freshness: .upstream)
    }

    /// A network without an IPv4 route whose DNS64 answers `ipv4only.arpa` under `prefix` after `delay`.
    static func ipv6Only(
        _ configuration: HostNetwork.Configuration = .init(), prefix: String? = "64:ff9b::/96"
    ) -> HostNetwork {
        let answers =
            prefix.flatMap(NAT64Prefix.init).map { prefix in
                NAT64Prefix.wellKnownIPv4.compactMap(prefix.synthesize)
            } ?? []
        return HostNetwork(
            configuration: configuration,
            askWellKnownName: {
                try? await Task.sleep(for: .milliseconds(20))
                return answers
            },
            routesIPv4: { false })
    }

    @Test("no IPv4 route: an IPv4-only answer becomes NAT64 addresses, marked, in its order; one discovery for all")
    func synthesis() async throws {
        let network = Self.ipv6Only()
        let answer = Self.answer(["203.0.113.7", "198.51.100.8"])
        #expect(try network.adaptedIfReady(answer) == nil, "the prefix is not known yet")
        let results = try await withThrowingTaskGroup(of: RankedResolution.self) { group in
            for _ in 0..<20 { group.addTask { try await network.adapted(answer) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(network.discoveries == 1, "concurrent first requests share one discovery")
        for adapted in results {
            #expect(adapted.addresses.map(\.ip.description) == ["64:ff9b::cb00:7107", "64:ff9b::c633:6408"])
            #expect(adapted.addresses.map(\.synthesizedFrom?.description) == ["203.0.113.7", "198.51.100.8"])
        }
        // Cached afterwards: no waiting, no second discovery.
        #expect(try network.adaptedIfReady(answer)?.addresses.first?.isSynthesized == true)
        #expect(network.discoveries == 1)
        // Reports about a synthesized address score the answer's address; probes dial through the prefix.
        #expect(network.cacheAddress(for: IPAddress("64:ff9b::cb00:7107")!) == IPAddress(ipv4: 203, 0, 113, 7))
        #expect(network.dialAddress(for: IPAddress(ipv4: 203, 0, 113, 7)) == IPAddress("64:ff9b::cb00:7107"))
        network.networkChanged()
        #expect(try network.adaptedIfReady(answer) == nil, "a network change forgets the prefix")
    }

    @Test("no IPv4 route: native and DNS64 AAAA addresses come first, IPv4 last (RFC 6724 rule 1); nothing synthesized")
    func ipv6First() async throws {
        let network = Self.ipv6Only()
        _ = await network.discoveredPrefixes()
        let adapted = try await network.adapted(Self.answer(["192.0.2.1", "2001:db8::1", "64:ff9b::c000:201"]))
        #expect(adapted.addresses.map(\.ip.description) == ["2001:db8::1", "64:ff9b::c000:201", "192.0.2.1"])
        #expect(adapted.addresses.map(\.rank) == [1, 2, 3])
        #expect(adapted.addresses.map(\.synthesizedFrom?.description) == [nil, "192.0.2.1", nil], "DNS64's marked")
    }

    @Test("synthesis off, or no prefix found: a clear noRoute error that names the missing IPv4 route")
    func noRoute() async throws {
        let off = Self.ipv6Only(.init(mode: .off))
        let error = await expectDNSError(.noRoute) { try await off.adapted(Self.answer(["203.0.113.7"])).resolution }
        #expect(error?.message.contains("no IPv4 route") == true && error?.message.contains("nat64.mode") == true)
        #expect(off.discoveries == 0)
        let noDNS64 = Self.ipv6Only(prefix: nil)
        await expectDNSError(.noRoute) { try await noDNS64.adapted(Self.answer(["203.0.113.7"])).resolution }
        #expect(noDNS64.discoveries == 1)
    }

    @Test("a prefix set by hand is used without discovery; a host with an IPv4 route keeps its answers as they are")
    func byHandAndIPv4() async throws {
        let byHand = Self.ipv6Only(.init(mode: .auto, prefixes: [NAT64Prefix("2001:db8:64::/96")!]), prefix: nil)
        let adapted = try #require(try byHand.adaptedIfReady(Self.answer(["203.0.113.7"])))
        #expect(adapted.addresses.map(\.ip.description) == ["2001:db8:64::cb00:7107"])
        #expect(byHand.discoveries == 0)
        let dualStack = HostNetwork(askWellKnownName: { [] }, routesIPv4: { true })
        let answer = Self.answer(["203.0.113.7", "2001:db8::1"])
        #expect(try dualStack.adaptedIfReady(answer) == answer)
        #expect(dualStack.discoveries == 0)
    }

    @Test("the route check of this machine: it has IPv4 (loopback tests run here), so answers pass unchanged")
    func systemRouteCheck() throws {
        let network = HostNetwork()
        #expect(network.hasIPv4Route)
        #expect(try network.adaptedIfReady(Self.answer(["203.0.113.7"]))?.addresses.first?.isSynthesized == false)
    }

    @Test("nat64.* settings: mode and prefixes, bad prefixes refused")
    func settings() throws {
        #expect(HostResolver.Configuration.default.network == HostNetwork.Configuration(mode: .auto, prefixes: []))
        let files = try TemporaryFiles()
        let good = try files.write("s.json", #"{"nat64": {"mode": "off", "prefixes": ["64:ff9b::/96"]}}"#)
        let loaded = try SettingsFile.load(path: good, environment: [:]).get().resolver
        #expect(loaded.network.mode == .off && loaded.network.prefixes == [NAT64Prefix.wellKnown])
        let bad = try files.write("bad.json", #"{"nat64": {"prefixes": ["64:ff9b::/95"]}}"#)
        #expect(throws: (any Error).self) { try SettingsFile.load(path: bad, environment: [:]).get().resolver }
    }
}

@Suite("NAT64 synthesis in the resolver")
struct NAT64ResolverTests {
    /// A resolver on an IPv6-only network (DNS64 prefix 64:ff9b::/96) whose upstream answers `upstream`.
    static func resolver(_ upstream: FakeUpstream) -> HostResolver {
        HostResolver(
            upstreams: [.init(name: "doh", kind: .httpDNS, resolver: upstream)], overrides: nil, hosts: nil,
            fallback: nil, cache: HostCache(), prober: nil, policy: .init(.parts(probing: nil), cachePath: nil),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), metricsFactory: nil,
            onShutdown: [], clientPool: PinnedClientPool(logger: Logger(label: "test")),
            network: NAT64Tests.ipv6Only())
    }

    @Test("reports about a synthesized address score the answer's IPv4 address and reorder the synthesized list")
    func reportsScoreTheAnswer() async throws {
        let upstream = FakeUpstream(.answer(["api.test": ["203.0.113.7", "203.0.113.8"]], ttl: 300))
        let resolver = Self.resolver(upstream)
        let first = try await resolver.resolveRanked("api.test")
        #expect(first.addresses.map(\.ip.description) == ["64:ff9b::cb00:7107", "64:ff9b::cb00:7108"])
        let host = try HostName("api.test")
        resolver.reportConnect(to: IPAddress("64:ff9b::cb00:7108")!, of: host, latency: .milliseconds(2))
        resolver.reportFailure(to: IPAddress("64:ff9b::cb00:7107")!, of: host)
        let scored = resolver.cache?.rankedAddresses(for: host) ?? []
        #expect(scored.first?.ip == IPAddress(ipv4: 203, 0, 113, 8), "the cache keeps the answer's addresses")
        #expect(scored.first?.latencyMilliseconds == 2)
        let again = try #require(try resolver.cachedRanked("api.test"))
        #expect(again.addresses.map(\.ip.description) == ["64:ff9b::cb00:7108", "64:ff9b::cb00:7107"])
        #expect(again.addresses.first?.synthesizedFrom == IPAddress(ipv4: 203, 0, 113, 8))
        await resolver.shutdown()
    }

    @Test("an answer that holds a DNS64 address keeps its scores under that address; loopback answers are left alone")
    func dns64AddressesKeepTheirScores() async throws {
        let upstream = FakeUpstream(
            .answer(["dual.test": ["203.0.113.9", "64:ff9b::cb00:7109"], "local.test": ["127.0.0.5"]], ttl: 300))
        let resolver = Self.resolver(upstream)
        _ = await resolver.network?.discoveredPrefixes()
        let answer = try await resolver.resolveRanked("dual.test")
        #expect(answer.addresses.map(\.ip.description) == ["64:ff9b::cb00:7109", "203.0.113.9"])
        let host = try HostName("dual.test")
        resolver.reportConnect(to: IPAddress("64:ff9b::cb00:7109")!, of: host, latency: .milliseconds(4))
        let scored = resolver.cache?.rankedAddresses(for: host) ?? []
        #expect(scored.first { $0.ip == IPAddress("64:ff9b::cb00:7109") }?.latencyMilliseconds == 4)
        #expect(try await resolver.resolveRanked("local.test").best == IPAddress(ipv4: 127, 0, 0, 5))
        await resolver.shutdown()
    }
}
