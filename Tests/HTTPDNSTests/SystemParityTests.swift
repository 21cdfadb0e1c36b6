import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSSettings
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// What the system resolver answers, the pipeline answers too: the hosts file, search domains and ndots, and the
/// system resolver itself as the last resort.
@Suite("System resolver parity")
struct SystemParityTests {
    /// dnsmasq lines for names that exist only under a search domain.
    static let searchRecords =
        TestZone.records + [
            "host-record=orders.svc.test,127.0.0.31,300",
            "host-record=orders.test,127.0.0.32,300",
            "host-record=api.svc.test,127.0.0.33,300",
        ]

    @Test("search candidates follow ndots, the list order and trailing dots")
    func candidates() throws {
        let policy = SearchPolicy(domains: ["svc.test", "test", "svc.test"], ndots: 2)
        #expect(policy.domains.map(\.name) == ["svc.test", "test"], "duplicates dropped")
        let short = try HostName("orders")
        #expect(policy.candidates(for: short).map(\.name) == ["orders.svc.test", "orders.test", "orders"])
        #expect(policy.candidates(for: short, absolute: true).map(\.name) == ["orders"])
        let dotted = try HostName("a.b.c")
        #expect(policy.candidates(for: dotted).map(\.name) == ["a.b.c", "a.b.c.svc.test", "a.b.c.test"])
        let oneDot = try HostName("orders.default")
        #expect(
            policy.candidates(for: oneDot).first?.name == "orders.default.svc.test", "1 dot < ndots 2: search first")
        #expect(SearchPolicy.none.candidates(for: short) == [short])
        let long = try HostName(["a", "b", "c", "d"].map { String(repeating: $0, count: 62) }.joined(separator: "."))
        #expect(SearchPolicy(domains: ["svc.test"], ndots: 5).candidates(for: long) == [long], "too long with a domain")
    }

    @Test("resolv.conf search, domain and ndots; LOCALDOMAIN and RES_OPTIONS win")
    func resolvConf() {
        let text = """
            # comment
            nameserver 127.0.0.53
            domain corp.test
            search svc.test cluster.test  # trailing comment
            options timeout:1 ndots:5 attempts:2
            """
        let plain = SearchPolicy.parse(resolvConf: text, environment: [:])
        #expect(plain.domains.map(\.name) == ["svc.test", "cluster.test"], "the last of search/domain wins")
        #expect(plain.ndots == 5)
        let domainLast = SearchPolicy.parse(resolvConf: "search a.test\ndomain b.test\n", environment: [:])
        #expect(domainLast.domains.map(\.name) == ["b.test"])
        let environment = SearchPolicy.parse(
            resolvConf: text, environment: ["LOCALDOMAIN": "x.test  y.test", "RES_OPTIONS": "ndots:2"])
        #expect(environment.domains.map(\.name) == ["x.test", "y.test"])
        #expect(environment.ndots == 2)
        let empty = SearchPolicy.parse(resolvConf: "", environment: [:])
        #expect(empty.domains.isEmpty && empty.ndots == 1, "glibc's defaults")
        #expect(SearchPolicy.parse(resolvConf: "options ndots:99", environment: [:]).ndots == 15, "capped like glibc")
    }

    @Test("settings keys replace the system's search list and ndots")
    func settingsKeys() throws {
        let file = try TemporaryFiles()
        let path = try file.write("settings.json", #"{"cares": {"search": ["svc.test"], "ndots": 2}}"#)
        let settings = try SettingsFile.load(path: path, environment: [:]).get().resolver
        #expect(settings.cares.searchDomains == ["svc.test"])
        #expect(settings.cares.ndots == 2)
        #expect(settings.cares.searchPolicy == SearchPolicy(domains: ["svc.test"], ndots: 2))
        #expect(settings.sources == [.overrides, .hosts, .cache, .cares], "hosts is in the default order")
        #expect(settings.systemFallback)
        let bad = SettingsFile.load(
            path: try file.write("bad.json", #"{"sources": {"order": ["cache", "hosts", "cares"]}}"#))
        #expect(bad.errors.first?.message.contains("hosts must come") == true)
    }

    @Test("the hosts file answers after the overrides and before the upstreams, and edits are picked up")
    func hostsLayer() async throws {
        let files = try TemporaryFiles()
        let hosts = try files.write(
            "hosts", "# system hosts\n127.0.0.40 box.test box\n127.0.0.41 pinned.test\nbad line here\n")
        let overrides = try files.write("overrides", "127.0.0.42 pinned.test\n")
        try await DNSMasq.with(records: Self.searchRecords) { server in
            var settings = HostResolver.Configuration.default
            settings.files.hostsFile = hosts
            settings.files.overridesFile = overrides
            settings.cares.servers = [server.address]
            settings.cares.searchDomains = []
            settings.systemFallback = false
            settings.probeEnabled = false
            settings.files.reloadIntervalMilliseconds = 20
            let resolver = try HostResolver(configuration: settings, persistingCache: false)
            let box = try await resolver.resolveRanked("box.test")
            #expect(box.addresses.map(\.ip.description) == ["127.0.0.40"])
            #expect(box.origin == .hosts, "bad lines of the system hosts file are skipped, the rest answers")
            #expect(try await resolver.resolveRanked("box").origin == .hosts)
            #expect(
                try await resolver.resolveRanked("pinned.test").addresses.map(\.ip.description) == ["127.0.0.42"],
                "overrides win")
            #expect(try await resolver.resolveRanked("multi.test").origin == .cares, "not in either file: the upstream")

            try "127.0.0.43 box.test\n".write(toFile: hosts, atomically: false, encoding: .utf8)
            #expect(
                try await waitUntil {
                    (try? await resolver.resolveRanked("box.test"))?.best?.description == "127.0.0.43"
                })
            resolver.overrides?.set([IPAddress("127.0.0.44")!], for: try HostPattern("box.test"))
            #expect(try await resolver.resolveRanked("box.test").best?.description == "127.0.0.44")
            await resolver.shutdown()
        }
    }

    @Test("short names are searched through c-ares; the answer names the match; a trailing dot is not searched")
    func searchThroughCAres() async throws {
        try await DNSMasq.with(records: Self.searchRecords) { server in
            var settings = HostResolver.Configuration.default
            settings.cares.servers = [server.address]
            settings.cares.searchDomains = ["svc.test", "test"]
            settings.cares.ndots = 1
            settings.systemFallback = false
            settings.probeEnabled = false
            settings.files.hostsFile = "/nonexistent/hosts"
            let resolver = try HostResolver(configuration: settings, persistingCache: false)
            let orders = try await resolver.resolveRanked("orders")
            #expect(orders.host == "orders.svc.test", "the first search domain that answers")
            #expect(orders.best?.description == "127.0.0.31")
            #expect(try await resolver.resolveRanked("orders").freshness == .cache, "the candidate is cached")
            // One dot >= ndots 1: the name as given first (multi.test exists), not multi.test.svc.test.
            #expect(try await resolver.resolveRanked("multi.test", family: .ipv4).host == "multi.test")
            // A name that exists only under a domain is found after the name as given fails.
            #expect(try await resolver.resolveRanked("api.svc").host == "api.svc.test")
            await #expect(throws: HTTPDNSError.self) { try await resolver.resolveRanked("orders.") }
            do {
                _ = try await resolver.resolveRanked("nothing-here")
                Issue.record("a name under no domain must fail")
            } catch let error as HTTPDNSError {
                #expect(error.host == "nothing-here", "the error names the name as given")
            }
            await resolver.shutdown()
        }
    }

    @Test("HTTP DNS providers are asked for the search candidates in the same order")
    func searchThroughDoH() async throws {
        try await DoHResolverTests.withDoH { _, dnsdist, transport in
            let doh = try DoHResolverTests.doh(dnsdist.httpURL, allowNonPublic: true, transport: transport)
            let resolver = HostResolver(
                upstreams: [.init(name: "doh", kind: .httpDNS, resolver: doh)],
                prober: nil,
                configuration: .parts(probing: nil, search: ["svc.test", "test"], ndots: 1)
            )
            let answer = try await resolver.resolveRanked("multi", family: .ipv4)
            #expect(answer.host == "multi.test", "multi.svc.test does not exist; multi.test does")
            #expect(Set(answer.addresses.map(\.ip.description)) == Set(TestZone.multiV4))
            #expect(answer.origin == "doh")
            await resolver.shutdown()
        }
    }

    @Test("the fallback is asked only when every upstream says the name does not exist; its answer is cached")
    func fallback() async throws {
        try await DNSMasq.with { main in
            try await DNSMasq.with(records: ["host-record=nss-only.test,127.0.0.45,300"]) { other in
                let upstream = try CAresResolver(configuration: .init(servers: [main.address], timeout: .seconds(5)))
                let backstop = try CAresResolver(configuration: .init(servers: [other.address], timeout: .seconds(5)))
                let resolver = HostResolver(
                    upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
                    fallback: .init(name: "system", kind: .other, resolver: backstop),
                    prober: nil,
                    configuration: .parts(probing: nil)
                )
                let answer = try await resolver.resolveRanked("nss-only.test", family: .ipv4)
                #expect(answer.best?.description == "127.0.0.45")
                #expect(
                    try await resolver.resolveRanked("multi.test", family: .ipv4).origin == .cares,
                    "the upstream answered")
                other.stop()
                #expect(try await resolver.resolveRanked("nss-only.test", family: .ipv4).freshness == .cache)
                do {
                    _ = try await resolver.resolveRanked("nowhere-at-all.test", family: .ipv4)
                    Issue.record("no layer knows the name")
                } catch let error as HTTPDNSError {
                    #expect(error.code == .notFound, "the upstream's NXDOMAIN stands when the fallback fails too")
                }
                await resolver.shutdown()
                upstream.shutdown()
                backstop.shutdown()
            }
        }
    }
}
