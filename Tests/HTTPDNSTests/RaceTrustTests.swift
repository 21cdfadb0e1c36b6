import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSSettings
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// Race mode against a hostile local network: DoH through dnsdist answers `multi.test` with the zone's 192.0.2.1
/// and 192.0.2.2, while the local resolver (a second dnsmasq, asked by c-ares) answers 198.51.100.66, as a spoofer
/// on the network would. Whichever answers first, the spoofed address never joins the HTTP DNS answer in the cache.
@Suite("Race mode keeps answers of different trust apart")
struct RaceTrustTests {
    static let spoofed = "198.51.100.66"
    static let name = "multi.test"

    /// Runs `body` with a racing resolver. With `slowLocal`, c-ares asks a server that never answers first, so its
    /// answer comes a timeout (1 s, scaled for sanitizer runs, where a DoH answer once took longer) after the DoH
    /// answer. The DoH connection is made before `body` runs, so the race
    /// is between answers, not against a TLS handshake on a loaded machine.
    static func withRace(
        slowLocal: Bool, trustLocal: Bool = false, _ body: (HostResolver) async throws -> Void
    ) async throws {
        try await DoHResolverTests.withDoH { _, dnsdist, transport in
            try await DNSMasq.with(records: ["host-record=\(name),\(spoofed),300"]) { local in
                let silent = try BoundUDPSocket()
                defer { silent.close() }
                let doh = try DoHResolverTests.doh(dnsdist.httpURL, transport: transport)
                let cares = try CAresResolver(
                    configuration: .init(
                        servers: slowLocal ? [silent.address, local.address] : [local.address],
                        timeout: TestTiming.scaled(.seconds(1)), tries: 1))
                _ = try? await doh.resolve(try HostName("warm-up.test"), family: .ipv4)
                let resolver = HostResolver(
                    upstreams: [
                        .init(name: "doh", kind: .httpDNS, resolver: doh),
                        .init(name: "cares", kind: .cares, resolver: cares, trusted: trustLocal),
                    ],
                    prober: nil,
                    configuration: .parts(race: true, probing: nil)
                )
                try await body(resolver)
                await resolver.shutdown()
                cares.shutdown()
            }
        }
    }

    static func cached(_ resolver: HostResolver) throws -> Set<String> {
        Set((resolver.cache?.rankedAddresses(for: try HostName(name), family: .ipv4) ?? []).map(\.ip.description))
    }

    @Test("HTTP DNS answers first: the later local answer is dropped, not merged")
    func trustedWinsFirst() async throws {
        try await Self.withRace(slowLocal: true) { resolver in
            let answer = try await resolver.resolveRanked(Self.name, family: .ipv4)
            #expect(answer.origin == "doh")
            // Let the local answer arrive (after its 1 s timeout, scaled) and be judged.
            await resolver.waitForBackgroundWork()
            try await Task.sleep(for: TestTiming.scaled(.milliseconds(1500)))
            await resolver.waitForBackgroundWork()
            #expect(try Self.cached(resolver) == ["192.0.2.1", "192.0.2.2"])
        }
    }

    @Test("the local resolver answers first: the caller gets it, then the HTTP DNS answer replaces it in the cache")
    func untrustedWinsFirst() async throws {
        try await Self.withRace(slowLocal: false) { resolver in
            let answer = try await resolver.resolveRanked(Self.name, family: .ipv4)
            await resolver.waitForBackgroundWork()
            try await waitUntil { (try? Self.cached(resolver)) == ["192.0.2.1", "192.0.2.2"] }
            #expect(try Self.cached(resolver) == ["192.0.2.1", "192.0.2.2"], "answered first by \(answer.origin)")
            #expect(try await resolver.resolveRanked(Self.name, family: .ipv4).origin == "doh")
        }
    }

    @Test("a local resolver the operator trusts joins the HTTP DNS answer, as before")
    func trustedLocalMerges() async throws {
        try await Self.withRace(slowLocal: true, trustLocal: true) { resolver in
            _ = try await resolver.resolveRanked(Self.name, family: .ipv4)
            // Whichever answers first, the other joins it.
            let all: Set<String> = ["192.0.2.1", "192.0.2.2", Self.spoofed]
            try await waitUntil { (try? Self.cached(resolver)) == all }
            #expect(try Self.cached(resolver) == all)
        }
    }

    @Test(
        "for a client network (EDNS Client Subnet, as hostsctl serve asks) the rule holds too: the untrusted local resolver never answers for a network while HTTP DNS is trusted"
    )
    func clientSubnetPath() async throws {
        let subnet = try #require(IPNetwork("198.51.100.0/24"))
        let host = try HostName(Self.name + ".")
        try await Self.withRace(slowLocal: false) { resolver in
            // Only c-ares can ask for a network, and it is not trusted: nothing for the network, so the server takes
            // the shared path, where the race decides.
            let answer = try await resolver.resolve(host, family: .ipv4, clientSubnet: subnet)
            #expect(answer == nil, "\(answer.map { $0.answer.addresses.map(\.ip.description) } ?? [])")
            #expect((try Self.cached(resolver)).contains(Self.spoofed) == false, "nothing untrusted was stored")
            let shared = try await resolver.resolveRanked(host.name, family: .ipv4)
            await resolver.waitForBackgroundWork()
            try await waitUntil { (try? Self.cached(resolver)) == ["192.0.2.1", "192.0.2.2"] }
            #expect(try Self.cached(resolver) == ["192.0.2.1", "192.0.2.2"], "answered first by \(shared.origin)")
        }
        // A local resolver the operator trusts answers for networks as before.
        try await Self.withRace(slowLocal: false, trustLocal: true) { resolver in
            let answer = try await resolver.resolve(host, family: .ipv4, clientSubnet: subnet)
            #expect(answer?.answer.addresses.map(\.ip.description) == [Self.spoofed])
        }
    }

    @Test("sources.trusted: httpdns by default; names outside httpdns, cares and system are refused")
    func setting() throws {
        #expect(HostResolver.Configuration.default.trustedSources == [.httpdns])
        let files = try TemporaryFiles()
        let path = try files.write("s.json", #"{"sources": {"trusted": ["httpdns", "cares"]}}"#)
        #expect(
            try SettingsFile.load(path: path, environment: [:]).get().resolver.trustedSources == [.httpdns, .cares])
        let bad = try files.write("bad.json", #"{"sources": {"trusted": ["cache"]}}"#)
        #expect(throws: (any Error).self) { try SettingsFile.load(path: bad, environment: [:]).get().resolver }
    }
}
