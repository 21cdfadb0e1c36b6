import Foundation
import Glibc
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// EDNS Client Subnet end to end against a real authoritative server that answers by network (PowerDNS with LUA
/// `view()` records): the client's network reaches PowerDNS from an ECS option, `ip=`, `edns_client_subnet=` or the
/// connection's address; each network gets its own answer, from the cache too; one network's answer never reaches
/// another; scope 0 answers are shared.
@Suite("HTTP DNS server: answers for the client's network (EDNS Client Subnet)")
struct ClientSubnetTests {
    static let logger = Logger(label: "client-subnet-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// PowerDNS behind c-ares behind the service, with a plain DNS listener on 127.0.0.1 (any loopback source).
    struct Lab {
        let pdns: PowerDNS
        let resolver: HostResolver
        let service: HTTPDNSService
        let server: HTTPDNSServer
        var dnsPort: Int { server.dnsPort ?? 0 }

        static func start(configuration: HTTPDNSService.Configuration = .init()) async throws -> Lab {
            let pdns = try await PowerDNS.start()
            let cares = try CAresResolver(configuration: .init(servers: [pdns.address], timeout: .seconds(2)))
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], cache: HostCache(), prober: nil,
                onShutdown: [{ cares.shutdown() }])
            let service = HTTPDNSService(resolver: resolver, configuration: configuration, logger: logger)
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    port: 0, dnsListen: ServerAddress(ip: try #require(IPAddress("0.0.0.0")), port: 0)),
                logger: logger)
            return Lab(pdns: pdns, resolver: resolver, service: service, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            pdns.stop()
        }

        /// Runs `body` with a lab, stopped afterwards whatever happens.
        static func with(
            _ configuration: HTTPDNSService.Configuration = .init(), _ body: (Lab) async throws -> Void
        ) async throws {
            let lab = try await start(configuration: configuration)
            do {
                try await body(lab)
            } catch {
                await lab.stop()
                throw error
            }
            await lab.stop()
        }
    }

    /// A query for `name` with an OPT record that carries `subnet` as its ECS option (none when `nil`).
    static func query(_ name: String, type: UInt16 = 1, subnet: IPNetwork?, id: UInt16 = 0x4242) -> [UInt8] {
        let option = subnet.map { EDNSClientSubnet.option($0) } ?? []
        var message = ServedNamesTests.message(
            labels: name.split(separator: ".").map(String.init), type: type,
            additional: [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, UInt8(option.count >> 8), UInt8(option.count & 0xFF)]
                + option)
        (message[0], message[1]) = (UInt8(id >> 8), UInt8(id & 0xFF))
        return message
    }

    /// One UDP exchange from a socket bound to `source` (a loopback address: the client's network).
    static func udp(_ port: Int, _ datagram: [UInt8], from source: String = "127.0.0.1") async throws -> [UInt8] {
        guard
            let answer = try await DNSTransportTests.udp(
                port, datagram, from: source, wait: TestTiming.scaled(.seconds(10)))
        else {
            throw TestServerError("no answer over UDP")
        }
        return answer
    }

    /// The A records of an answer to `name`.
    static func addresses(_ answer: [UInt8], _ name: String) throws -> [String] {
        try DNSTransportTests.addresses(answer, name)
    }

    static func network(_ text: String) throws -> IPNetwork { try #require(IPNetwork(text)) }

    @Test("c-ares asks with the client's subnet and reads the scope PowerDNS answers with")
    func caresCarriesTheSubnet() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        let cares = try CAresResolver(configuration: .init(servers: [pdns.address], timeout: .seconds(2)))
        defer { cares.shutdown() }
        let www = try HostName("www.ecs.test")
        let first = try await cares.resolve(www, family: .ipv4, clientSubnet: try Self.network("198.51.100.0/24"))
        #expect(first.resolution.addresses.map(\.ip.description) == ["192.0.2.1"])
        #expect(first.scopePrefixLength == 24)
        let second = try await cares.resolve(www, family: .ipv4, clientSubnet: try Self.network("203.0.113.0/24"))
        #expect(second.resolution.addresses.map(\.ip.description) == ["192.0.2.2"])
        let six = try await cares.resolve(www, family: .ipv6, clientSubnet: try Self.network("2001:db8:1::/48"))
        #expect(six.resolution.addresses.map(\.ip.description) == ["2001:db8::1"])
        #expect(six.scopePrefixLength == 48)
        let flat = try await cares.resolve(
            try HostName("flat.ecs.test"), family: .ipv4, clientSubnet: try Self.network("198.51.100.0/24"))
        #expect(flat.resolution.addresses.map(\.ip.description) == ["192.0.2.50"])
        #expect(flat.scopePrefixLength == 0)
        // Without the option PowerDNS goes by the query's source, 127.0.0.1.
        let plain = try await cares.resolve(www, family: .ipv4)
        #expect(plain.addresses.map(\.ip.description) == ["192.0.2.9"])
    }

    @Test(
        "a client that states a network wider than the configured prefix cannot choose other networks' answers (RFC 7871 §11.3): its answer serves only that same statement"
    )
    func chosenWidePrefix() async throws {
        try await Lab.with { lab in
            // One UDP query stating 198.51.0.0/16: PowerDNS answers the rest (192.0.2.9) with scope 16.
            let wide = try await Self.udp(
                lab.dnsPort, Self.query("www.ecs.test", subnet: try Self.network("198.51.0.0/16"), id: 1))
            #expect(try Self.addresses(wide, "www.ecs.test") == ["192.0.2.9"])
            // A client of 198.51.100.0/24 still gets its own network's answer, first and from the cache.
            for round in 0..<2 {
                let own = try await Self.udp(
                    lab.dnsPort, Self.query("www.ecs.test", subnet: try Self.network("198.51.100.7/32"), id: 2))
                #expect(try Self.addresses(own, "www.ecs.test") == ["192.0.2.1"], "round \(round)")
            }
            // And the wide statement, asked again, gets what was kept for it.
            let again = try await Self.udp(
                lab.dnsPort, Self.query("www.ecs.test", subnet: try Self.network("198.51.0.0/16"), id: 3))
            #expect(try Self.addresses(again, "www.ecs.test") == ["192.0.2.9"])
        }
    }

    @Test("two networks get their own answers over UDP, cache hits included, and the scope comes back to the client")
    func eachNetworkItsOwnAnswer() async throws {
        try await Lab.with { lab in
            let a = try Self.network("198.51.100.7/32")
            let b = try Self.network("203.0.113.9/32")
            for round in 0..<3 {
                for (network, expected) in [(a, "192.0.2.1"), (b, "192.0.2.2")] {
                    let answer = try await Self.udp(lab.dnsPort, Self.query("www.ecs.test", subnet: network))
                    #expect(try Self.addresses(answer, "www.ecs.test") == [expected], "round \(round), \(network)")
                    // The client's own option comes back, with the scope PowerDNS gave the /24 the server asked for.
                    let echoed = try #require(try EDNSClientSubnet.find(in: answer))
                    #expect(echoed.subnet == network)
                    #expect(echoed.scope == 24)
                }
            }
            // A third network in neither view, and a client that sends no option (its address, 127.0.0.1, is used).
            let other = try await Self.udp(
                lab.dnsPort, Self.query("www.ecs.test", subnet: try Self.network("192.0.2.0/24")))
            #expect(try Self.addresses(other, "www.ecs.test") == ["192.0.2.9"])
            let plain = try await Self.udp(lab.dnsPort, Self.query("www.ecs.test", subnet: nil))
            #expect(try Self.addresses(plain, "www.ecs.test") == ["192.0.2.9"])
            #expect(try EDNSClientSubnet.find(in: plain) == nil)
            #expect(lab.service.subnetAnswers.size.names == 1)
            #expect(lab.service.subnetAnswers.size.networks == 4)
        }
    }

    @Test("the connection's address is the network of a client that says nothing")
    func connectionAddressIsTheNetwork() async throws {
        try await Lab.with { lab in
            for _ in 0..<2 {
                for (source, expected) in [
                    ("127.0.1.5", "192.0.2.11"), ("127.0.2.5", "192.0.2.12"), ("127.0.0.1", "192.0.2.9"),
                ] {
                    let answer = try await Self.udp(lab.dnsPort, Self.query("www.ecs.test", subnet: nil), from: source)
                    #expect(try Self.addresses(answer, "www.ecs.test") == [expected], "from \(source)")
                }
            }
        }
    }

    @Test("the vendor APIs' ip= and the JSON API's edns_client_subnet= choose the network")
    func statedNetworks() async throws {
        try await Lab.with(.init(accounts: ["100000": nil])) { lab in
            let client = try #require(IPAddress("127.0.0.1"))
            func get(_ target: String) async -> String {
                let response = await lab.service.handle(ServiceRequest(method: "GET", target: target, client: client))
                return "\(response.status) " + String(decoding: response.body, as: UTF8.self)
            }
            #expect(await get("/d?dn=www.ecs.test&ip=198.51.100.20") == "200 192.0.2.1")
            #expect(await get("/d?dn=www.ecs.test&ip=203.0.113.20") == "200 192.0.2.2")
            #expect(await get("/d?dn=www.ecs.test") == "200 192.0.2.9")
            #expect(await get("/d?dn=www.ecs.test&ip=not-an-address").hasPrefix("400 "))
            let alibaba = await get("/100000/d?host=www.ecs.test&ip=203.0.113.77")
            #expect(alibaba.contains("\"ips\":[\"192.0.2.2\"]"), "\(alibaba)")
            #expect(await get("/100000/d?host=www.ecs.test&ip=300.1.1.1").contains("InvalidIP"))
            let json = await get("/resolve?name=www.ecs.test&edns_client_subnet=198.51.100.0/24")
            #expect(json.contains("\"data\":\"192.0.2.1\""), "\(json)")
            #expect(json.contains("\"edns_client_subnet\":\"198.51.100.0/24\""), "\(json)")
            #expect(await get("/resolve?name=www.ecs.test&edns_client_subnet=nonsense").hasPrefix("400 "))
        }
    }

    @Test(
        "a negative answer scoped to one network stays that network's: another network still gets its own answer; a scope-0 negative is every network's"
    )
    func scopedNegativeAnswers() async throws {
        try await Lab.with { lab in
            // part.ecs.test is, for 127.0.1.0/24, a CNAME to a name without addresses (NODATA, scope /24), and has an
            // address of its own for 127.0.2.0/24.
            let empty = try await Self.udp(lab.dnsPort, Self.query("part.ecs.test", subnet: nil), from: "127.0.1.1")
            #expect(empty[3] & 0x0F == 0 && empty[7] == 0, "NODATA for 127.0.1.0/24: rcode \(empty[3] & 0x0F)")
            // Before, that NODATA marked the name the same for every network for 30 s, and 127.0.2.0/24 got the
            // server's own view (192.0.2.60).
            let other = try await Self.udp(lab.dnsPort, Self.query("part.ecs.test", subnet: nil), from: "127.0.2.1")
            #expect(try Self.addresses(other, "part.ecs.test") == ["192.0.2.61"])
            // flat.ecs.test has no AAAA for anyone: scope 0, so the name is marked the same for every network.
            _ = try await Self.udp(lab.dnsPort, Self.query("flat.ecs.test", type: 28, subnet: nil), from: "127.0.1.1")
            let key = ClientSubnetCache.Key(name: "flat.ecs.test", family: .ipv6)
            guard
                case .shared = lab.service.subnetAnswers.lookup(
                    key, subnet: try Self.network("203.0.113.0/24"), now: .now)
            else {
                Issue.record("a scope-0 negative answer did not mark the name shared")
                return
            }
        }
    }

    @Test(
        "an answer for every network (scope 0) is shared through the resolver's cache and echoed with scope 0; one to a network the client only stated (chosen) is not"
    )
    func sharedAnswers() async throws {
        try await Lab.with { lab in
            let key = ClientSubnetCache.Key(name: "flat.ecs.test", family: .ipv4)
            // 127.0.0.1 states 198.51.100.0/24, a network it is not in: the scope-0 answer serves that statement
            // only (before, it became every network's answer for its TTL).
            let chosen = try await Self.udp(
                lab.dnsPort, Self.query("flat.ecs.test", subnet: try Self.network("198.51.100.0/24")))
            #expect(try Self.addresses(chosen, "flat.ecs.test") == ["192.0.2.50"])
            #expect(lab.resolver.cache?.resolution(for: try HostName("flat.ecs.test"), family: .ipv4) == nil)
            if case .shared = lab.service.subnetAnswers.lookup(
                key, subnet: try Self.network("203.0.113.0/24"), now: .now)
            {
                Issue.record("a chosen network's answer marked the name shared")
            }
            // Its own network (a private one stated is never sent upstream: the client's own address stands in).
            let network = try Self.network("127.0.0.0/24")
            let answer = try await Self.udp(lab.dnsPort, Self.query("flat.ecs.test", subnet: network))
            #expect(try Self.addresses(answer, "flat.ecs.test") == ["192.0.2.50"])
            #expect(try EDNSClientSubnet.find(in: answer)?.scope == 0)
            // Stored where every lookup finds it, and the name is known to be the same for every network.
            #expect(
                lab.resolver.cache?.resolution(for: try HostName("flat.ecs.test"), family: .ipv4)?.best?.description
                    == "192.0.2.50")
            guard
                case .shared = lab.service.subnetAnswers.lookup(
                    key, subnet: try Self.network("203.0.113.0/24"), now: .now)
            else {
                Issue.record("flat.ecs.test is not marked shared")
                return
            }
            #expect(lab.service.subnetAnswers.size.names == 0)
        }
    }

    @Test("with ECS off every client gets the server's own view and no option comes back")
    func off() async throws {
        try await Lab.with(.init(clientSubnetMode: .off)) { lab in
            for network in [try Self.network("198.51.100.0/24"), try Self.network("203.0.113.0/24")] {
                let answer = try await Self.udp(lab.dnsPort, Self.query("www.ecs.test", subnet: network))
                #expect(try Self.addresses(answer, "www.ecs.test") == ["192.0.2.9"])
                #expect(try EDNSClientSubnet.find(in: answer) == nil)
            }
            let fromB = try await Self.udp(lab.dnsPort, Self.query("www.ecs.test", subnet: nil), from: "127.0.2.5")
            #expect(try Self.addresses(fromB, "www.ecs.test") == ["192.0.2.9"])
        }
    }

    @Test("connection mode ignores what clients say and goes by their address")
    func connectionMode() async throws {
        try await Lab.with(.init(clientSubnetMode: .connection)) { lab in
            let claim = try Self.network("198.51.100.0/24")
            let answer = try await Self.udp(lab.dnsPort, Self.query("www.ecs.test", subnet: claim), from: "127.0.2.5")
            #expect(try Self.addresses(answer, "www.ecs.test") == ["192.0.2.12"])
            #expect(try EDNSClientSubnet.find(in: answer) == nil)
        }
    }

    @Test("a malformed client subnet option is answered FORMERR")
    func malformedOption() async throws {
        try await Lab.with { lab in
            // Family 1, /24, with four address bytes where three belong (RFC 7871 §6), and one with bits past /20.
            for data: [UInt8] in [[0, 1, 24, 0, 198, 51, 100, 7], [0, 1, 20, 0, 198, 51, 100], [0, 3, 8, 0, 10]] {
                let option: [UInt8] = [0, 8, 0, UInt8(data.count)] + data
                var message = ServedNamesTests.message(
                    labels: ["www", "ecs", "test"], type: 1,
                    additional: [0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, UInt8(option.count)] + option)
                (message[0], message[1]) = (0x77, 0x77)
                let answer = try await Self.udp(lab.dnsPort, message)
                #expect(answer[3] & 0x0F == 1, "\(data)")
            }
        }
    }

    @Test("kdig +subnet gets its network's answer and the scope back")
    func kdigSubnet() async throws {
        try await Lab.with { lab in
            for (subnet, expected) in [("198.51.100.0/24", "192.0.2.1"), ("203.0.113.0/24", "192.0.2.2")] {
                let (status, output) = try await InteropTests.run(
                    "/usr/bin/kdig",
                    [
                        "@127.0.0.1", "-p", "\(lab.dnsPort)", "+notcp", "+subnet=\(subnet)", "+timeout=20",
                        "www.ecs.test", "A",
                    ])
                #expect(status == 0, "\(output)")
                #expect(output.contains(expected), "\(output)")
                #expect(output.contains("CLIENT-SUBNET: \(subnet)/24"), "\(output)")
            }
        }
    }

    @Test(
        "HTTP DNS providers get the client's network in their own form: ECS through dnsdist, edns_client_subnet=, ip=")
    func httpDNSForms() async throws {
        try await Lab.with(.init(accounts: ["100000": nil])) { lab in
            // dnsdist (a DoH server no one here wrote) relays the RFC 8484 query's ECS option to PowerDNS as it is.
            let dnsdist = try await DNSDist.start(backend: lab.pdns.address)
            defer { dnsdist.stop() }
            // Generous: under a loaded CI run a query PowerDNS answers late costs the server c-ares' retry (2 s, then
            // 4 s), which a 5 s limit cut off; what this test checks is the network each form carries.
            let transport = try HTTPDNSTransport(configuration: .init(requestTimeout: .seconds(20)))
            let base = "http://127.0.0.1:\(lab.server.port)"
            let providers: [(String, HTTPDNSResolver.API, String)] = [
                ("RFC 8484 GET", .dnsMessage(method: .get), dnsdist.httpURL),
                ("RFC 8484 POST", .dnsMessage(method: .post), dnsdist.httpURL),
                ("JSON", .dnsJSON, base + "/resolve"),
                ("Alibaba", .alibaba(account: "100000"), base),
                ("Tencent", .tencent(), base),
            ]
            do {
                for (name, api, url) in providers {
                    let resolver = try HTTPDNSResolver(
                        configuration: .init(
                            api: api, endpoints: [try HTTPDNSEndpoint(url)], allowNonPublicAddresses: true),
                        transport: transport)
                    let www = try HostName("www.ecs.test")
                    for (network, expected) in [("198.51.100.0/24", "192.0.2.1"), ("203.0.113.0/24", "192.0.2.2")] {
                        let answer = try await resolver.resolve(
                            www, family: .ipv4, clientSubnet: try Self.network(network))
                        #expect(answer.resolution.addresses.map(\.ip.description) == [expected], "\(name) \(network)")
                        // Wire and JSON answers say their scope; the vendor APIs' answers hold for what was sent.
                        #expect(answer.scopePrefixLength == 24, "\(name) \(network)")
                    }
                }
            } catch {
                await transport.shutdown()
                throw error
            }
            await transport.shutdown()
        }
    }

    @Test("a network's reports order its own answers within 10 reports, and never another network's")
    func steeringByNetwork() async throws {
        let overrides = HostOverrides()
        let addresses = [IPAddress(ipv4: 192, 0, 2, 1), IPAddress(ipv4: 192, 0, 2, 2), IPAddress(ipv4: 192, 0, 2, 3)]
        overrides.set(addresses, for: try HostPattern("steer.test"))
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
        let service = HTTPDNSService(
            resolver: resolver,
            configuration: .init(acceptClientReports: true, reportNetworks: [try Self.network("127.0.0.0/8")]),
            logger: Self.logger)
        let a = try #require(IPAddress("127.0.1.5"))
        let b = try #require(IPAddress("127.0.2.5"))
        func order(for client: IPAddress, over transport: ServiceRequest.Transport = .http) async -> [String] {
            let query = Self.query("steer.test", subnet: nil)
            let response = await service.handle(
                ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message", body: query,
                    client: client, transport: transport))
            return (try? Self.addresses(response.body, "steer.test")) ?? []
        }
        func report(_ ip: String, _ milliseconds: Int?, from client: IPAddress) async -> Int {
            let measured = milliseconds.map { "\"connectMs\":\($0)" } ?? "\"failed\":true"
            return await service.handle(
                ServiceRequest(
                    method: "POST", target: "/report",
                    body: Array("{\"host\":\"steer.test\",\"ip\":\"\(ip)\",\(measured)}".utf8),
                    client: client)
            ).status
        }
        let initial = await order(for: a)
        #expect(initial == ["192.0.2.1", "192.0.2.2", "192.0.2.3"])
        #expect(await order(for: b) == initial)
        // Network A measures 192.0.2.3 fast and 192.0.2.1 slow; B measures nothing.
        var flippedAfter: Int?
        for count in 1...10 {
            #expect(await report("192.0.2.3", 4, from: a) == 204)
            #expect(await report("192.0.2.1", 90, from: a) == 204)
            if flippedAfter == nil, await order(for: a).first == "192.0.2.3" { flippedAfter = count }
            #expect(await order(for: b) == initial, "B's order moved after \(count) of A's reports")
        }
        let moved = try #require(flippedAfter, "A's order did not follow its reports within 10")
        #expect(moved <= 10)
        // 192.0.2.1 measured at 90 ms stays ahead of 192.0.2.2, which A never measured (the server's unmeasured 250 ms).
        #expect(await order(for: a) == ["192.0.2.3", "192.0.2.1", "192.0.2.2"])
        // The same over plain DNS (the memo never serves A's order to B, nor B's to A).
        for _ in 0..<3 {
            #expect(await order(for: b, over: .udp) == initial)
            #expect(await order(for: a, over: .udp).first == "192.0.2.3")
        }
        // A failure in A's network puts that address last for A.
        #expect(await report("192.0.2.3", nil, from: a) == 204)
        #expect(await order(for: a).last == "192.0.2.3")
        #expect(await order(for: b) == initial)
        #expect(service.networkScores.size.networks == 1)
        // With a region an operator defined, A's reports order the answers of every client in it (B too), and
        // still of no one outside it.
        let regional = HTTPDNSService(
            resolver: resolver,
            configuration: .init(
                acceptClientReports: true, reportNetworks: [try Self.network("127.0.0.0/8")],
                steeringRegions: [try Self.network("127.0.0.0/16")]),
            logger: Self.logger)
        let outside = try #require(IPAddress("127.1.0.5"))
        #expect(
            await regional.handle(
                ServiceRequest(
                    method: "POST", target: "/report",
                    body: Array(#"{"host":"steer.test","ip":"192.0.2.3","connectMs":4}"#.utf8), client: a)
            ).status == 204)
        for (client, expected) in [(a, "192.0.2.3"), (b, "192.0.2.3"), (outside, "192.0.2.1")] {
            let response = await regional.handle(
                ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message",
                    body: Self.query("steer.test", subnet: nil), client: client))
            #expect((try? Self.addresses(response.body, "steer.test"))?.first == expected, "\(client)")
        }
        await resolver.shutdown()
    }

    @Test(
        "behind a trusted proxy the client named by the configured header (X-Forwarded-For or Forwarded) is the network; the other header and untrusted peers are not believed"
    )
    func trustedProxies() async throws {
        let proxy = [try Self.network("127.0.0.0/8")]
        let configurations: [(HTTPDNSService.Configuration, HTTPDNSService.Configuration.ProxyHeader?)] = [
            (HTTPDNSService.Configuration(trustedProxies: proxy), .xForwardedFor),
            (HTTPDNSService.Configuration(trustedProxies: proxy, trustedProxyHeader: .forwarded), .forwarded),
            (HTTPDNSService.Configuration(), nil),
        ]
        for (configuration, header) in configurations {
            try await Lab.with(configuration) { lab in
                func curl(_ headers: String...) async throws -> String {
                    let (status, output) = try await InteropTests.run(
                        "/usr/bin/curl",
                        ["-s", "--max-time", "20"] + headers.flatMap { ["-H", $0] }
                            + ["http://127.0.0.1:\(lab.server.port)/resolve?name=www.ecs.test&type=A"])
                    #expect(status == 0, "\(output)")
                    return output
                }
                let readsXFF = header == .xForwardedFor
                let readsForwarded = header == .forwarded
                // A client the proxy saw; then one that wrote its own claim before the proxy's entry (the proxy's
                // entry, the last, is the one believed); then RFC 7239 with an IPv6 node and a port.
                let plain = try await curl("X-Forwarded-For: 198.51.100.7")
                #expect(plain.contains(readsXFF ? "192.0.2.1" : "192.0.2.9"), "\(plain)")
                let spoofed = try await curl("X-Forwarded-For: 198.51.100.7, 203.0.113.5")
                #expect(spoofed.contains(readsXFF ? "192.0.2.2" : "192.0.2.9"), "\(spoofed)")
                let rfc = try await curl("Forwarded: for=\"[2001:db8::1]:4711\", for=203.0.113.5:80;proto=https")
                #expect(rfc.contains(readsForwarded ? "192.0.2.2" : "192.0.2.9"), "\(rfc)")
                // A balancer that appends only to X-Forwarded-For passes the client's own Forwarded through: with
                // X-Forwarded-For configured, the client cannot choose 198.51.100.7 that way (and the reverse).
                let both = try await curl("Forwarded: for=198.51.100.7", "X-Forwarded-For: 203.0.113.5")
                #expect(both.contains(header == nil ? "192.0.2.9" : readsXFF ? "192.0.2.2" : "192.0.2.1"), "\(both)")
                let reverse = try await curl("Forwarded: for=203.0.113.5", "X-Forwarded-For: 198.51.100.7")
                #expect(reverse.contains(header == nil ? "192.0.2.9" : readsXFF ? "192.0.2.1" : "192.0.2.2"))
                // A hop that is not an address stops the walk: the proxy itself (127.0.0.1) is the client.
                let garbage = try await curl("X-Forwarded-For: 198.51.100.7, unknown")
                #expect(garbage.contains("192.0.2.9"), "\(garbage)")
            }
        }
        #expect(
            ForwardedHeader.rfc7239("for=_hidden, for=\"[2001:db8::2]\"").map { $0?.description } == [
                nil, "2001:db8::2",
            ])
        #expect(
            ForwardedHeader.xForwardedFor(" 192.0.2.1:80 ,[2001:db8::3]:1").map { $0?.description } == [
                "192.0.2.1", "2001:db8::3",
            ])
    }

    @Test(
        "relayed answers pass the private-address guard: an HTTPS record whose ipv4hint is internal gets NXDOMAIN, as a missing name does; a public hint is relayed"
    )
    func relayedAnswersGuarded() async throws {
        let lab = try await Lab.start(configuration: .init(otherTypes: .forward))
        let cares = try CAresResolver(configuration: .init(servers: [lab.pdns.address], timeout: .seconds(2)))
        func ask(_ name: String, guarded: Bool = true) async -> [UInt8] {
            let service = HTTPDNSService(
                resolver: lab.resolver, configuration: .init(otherTypes: .forward, guardsForwardedAddresses: guarded),
                logger: Self.logger, forwarder: CAresForwarder(resolver: cares))
            return await service.handle(
                ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message",
                    body: Self.query(name, type: 65, subnet: nil), client: IPAddress("127.0.0.1"))
            ).body
        }
        func code(_ answer: [UInt8]) -> UInt8 { answer.count > 3 ? answer[3] & 0x0F : 0xFF }
        func answers(_ answer: [UInt8]) -> Int { answer.count > 7 ? Int(answer[6]) << 8 | Int(answer[7]) : -1 }
        let guarded = await ask("web.ecs.test")
        let missing = await ask("nothing.ecs.test")
        #expect(code(guarded) == 3 && answers(guarded) == 0, "withheld: \(guarded)")
        #expect(code(missing) == 3, "a missing name gets the same NXDOMAIN")
        let open = await ask("web.ecs.test", guarded: false)
        #expect(code(open) == 0 && answers(open) == 1, "relayed when the operator allows guarded addresses")
        let published = await ask("pub.ecs.test")
        #expect(code(published) == 0 && answers(published) == 1, "a public hint is relayed")
        cares.shutdown()
        await lab.stop()
    }

    @Test(
        "the guard reads addresses wherever an answer puts them: SRV glue, HTTPS hints; unreadable answers count as guarded"
    )
    func forwardedAnswerGuardWalk() {
        // One question (srv.test SRV), one SRV answer pointing at box.test, and box.test's A in the additional
        // section.
        func message(glue: [UInt8]) -> [UInt8] {
            let header: [UInt8] = [0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 1]
            let question: [UInt8] = [3] + Array("srv".utf8) + [4] + Array("test".utf8) + [0, 0, 33, 0, 1]
            let target: [UInt8] = [3] + Array("box".utf8) + [4] + Array("test".utf8) + [0]
            let srv: [UInt8] =
                [0xC0, 12, 0, 33, 0, 1, 0, 0, 0, 60, 0, UInt8(6 + target.count), 0, 0, 0, 0, 1, 187] + target
            let a: [UInt8] = target + [0, 1, 0, 1, 0, 0, 0, 60, 0, 4] + glue
            return header + question + srv + a
        }
        #expect(ForwardedAnswerGuard.handsOutGuardedAddress(message(glue: [10, 0, 0, 7])))
        #expect(ForwardedAnswerGuard.handsOutGuardedAddress(message(glue: [127, 0, 0, 1])))
        #expect(!ForwardedAnswerGuard.handsOutGuardedAddress(message(glue: [93, 184, 216, 34])))
        #expect(ForwardedAnswerGuard.handsOutGuardedAddress(Array(message(glue: [93, 184, 216, 34]).dropLast(2))))
    }

    @Test("relayed types carry the client's network too: a CNAME by network, kept per network, the scope echoed")
    func relayedTypes() async throws {
        let lab = try await Lab.start(configuration: .init(otherTypes: .forward))
        let cares = try CAresResolver(configuration: .init(servers: [lab.pdns.address], timeout: .seconds(2)))
        // A service of its own that forwards through c-ares to PowerDNS, over the lab's resolver.
        let service = HTTPDNSService(
            resolver: lab.resolver, configuration: .init(otherTypes: .forward), logger: Self.logger,
            forwarder: CAresForwarder(resolver: cares))
        func cname(_ network: IPNetwork?, from client: String = "127.0.0.1") async throws -> (String, Int?) {
            let response = await service.handle(
                ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message",
                    body: Self.query("alias.ecs.test", type: 5, subnet: network), client: IPAddress(client)))
            let body = response.body
            // The first label of the first answer record's data: the CNAME target's.
            guard body.count > 12, body[7] >= 1, let question = DNSMessageWalk.skipName(body, from: 12),
                let owner = DNSMessageWalk.skipName(body, from: question + 4), owner + 11 < body.count
            else { return ("no answer: \(body)", nil) }
            let label = body[owner + 10]
            let target = String(decoding: body[(owner + 11)..<min(owner + 11 + Int(label), body.count)], as: UTF8.self)
            return (target, try EDNSClientSubnet.find(in: body)?.scope)
        }
        do {
            for _ in 0..<3 {
                let a = try await cname(try Self.network("198.51.100.0/24"))
                #expect(a == ("a", 24), "\(a)")
                let b = try await cname(try Self.network("203.0.113.0/24"))
                #expect(b == ("b", 24), "\(b)")
                // By connection address: 127.0.0.0/24, in neither view; nothing echoed (the client sent no option).
                let z = try await cname(nil)
                #expect(z == ("z", nil), "\(z)")
            }
        } catch {
            cares.shutdown()
            await lab.stop()
            throw error
        }
        cares.shutdown()
        await lab.stop()
    }

    @Test("a network's answer in the last tenth of its TTL is asked again in the background, once")
    func prefetch() async throws {
        try await Lab.with { lab in
            let network = try Self.network("198.51.100.0/24")
            let query = Self.query("www.ecs.test", subnet: network)
            _ = try await Self.udp(lab.dnsPort, query)
            let key = ClientSubnetCache.Key(name: "www.ecs.test", family: .ipv4)
            guard
                case .answer(let kept, _, let ttl, let prefetch) = lab.service.subnetAnswers.lookup(
                    key, subnet: network, now: .now)
            else {
                Issue.record("no answer kept for \(network)")
                return
            }
            #expect(ttl > 290 && !prefetch)
            // The same answer, as if kept 295 of its 300 seconds ago: the next client's lookup is served it and
            // starts one refresh, after which the network's answer has its whole TTL again.
            lab.service.subnetAnswers.keep(key, network: network, answer: kept, now: .now - .seconds(295))
            let answer = try await Self.udp(lab.dnsPort, query)
            #expect(try Self.addresses(answer, "www.ecs.test") == ["192.0.2.1"])
            let refreshed = try await waitUntil {
                guard case .answer(_, _, let ttl, _) = lab.service.subnetAnswers.lookup(key, subnet: network, now: .now)
                else { return false }
                return ttl > 290
            }
            #expect(refreshed, "the answer was not fetched again before it expired")
        }
        // The decision itself, on a clock of its own: not before the last tenth, then once.
        let cache = ClientSubnetCache()
        let key = ClientSubnetCache.Key(name: "n.test", family: .ipv4)
        let network = try Self.network("203.0.113.0/24")
        let start = ContinuousClock.now
        let answer = RankedResolution(
            host: "n.test", family: .ipv4, addresses: [], origin: "test", ttl: 100, freshness: .upstream)
        cache.keep(key, network: network, answer: answer, now: start)
        func prefetches(at seconds: Int64) -> Bool? {
            guard
                case .answer(_, _, _, let prefetch) = cache.lookup(key, subnet: network, now: start + .seconds(seconds))
            else { return nil }
            return prefetch
        }
        #expect(prefetches(at: 50) == false)
        #expect(prefetches(at: 89) == false)
        #expect(prefetches(at: 91) == true)
        #expect(prefetches(at: 92) == false)
        #expect(prefetches(at: 101) == nil)
    }

    @Test("the tables by network are bounded: networks a name (least recently used out) and names")
    func bounded() throws {
        let cache = ClientSubnetCache(limits: .init(maximumNames: 3, maximumNetworksPerName: 4))
        let now = ContinuousClock.now
        let answer = RankedResolution(
            host: "n.test", family: .ipv4, addresses: [], origin: "test", ttl: 300, freshness: .upstream)
        let key = ClientSubnetCache.Key(name: "n.test", family: .ipv4)
        func network(_ n: Int) -> IPNetwork {
            IPNetwork(IPAddress(ipv4: 10, UInt8(n / 256), UInt8(n % 256), 0), prefixLength: 24)
        }
        for n in 0..<100 { cache.keep(key, network: network(n), answer: answer, now: now + .milliseconds(n)) }
        #expect(cache.size.networks == 4)
        // The most recent networks stay; the first ones went.
        guard case .answer = cache.lookup(key, subnet: network(99), now: now + .seconds(1)) else {
            Issue.record("the latest network's answer is gone")
            return
        }
        guard case .miss = cache.lookup(key, subnet: network(0), now: now + .seconds(1)) else {
            Issue.record("the first network's answer is still there")
            return
        }
        for name in 0..<10 {
            cache.keep(.init(name: "n\(name).test", family: .ipv4), network: network(1), answer: answer, now: now)
        }
        // The sizes are counted as the table changes: the three newest names, one network each.
        #expect(cache.size.names == 3 && cache.size.networks == 3, "\(cache.size)")
        // A name found the same for every network no longer counts.
        cache.keepShared(.init(name: "n9.test", family: .ipv4), ttl: 60, now: now)
        #expect(cache.size.names == 2 && cache.size.networks == 2, "\(cache.size)")
        // A name looked up since it entered gets a second chance: the next oldest goes instead.
        let names = ClientSubnetCache(limits: .init(maximumNames: 3, maximumNetworksPerName: 4))
        func nameKey(_ n: Int) -> ClientSubnetCache.Key { .init(name: "s\(n).test", family: .ipv4) }
        for n in 0..<3 { names.keepShared(nameKey(n), ttl: 60, now: now) }
        guard case .shared = names.lookup(nameKey(0), subnet: network(1), now: now) else {
            Issue.record("s0 is not marked shared")
            return
        }
        names.keepShared(nameKey(3), ttl: 60, now: now)
        guard case .shared = names.lookup(nameKey(0), subnet: network(1), now: now),
            case .miss = names.lookup(nameKey(1), subnet: network(1), now: now)
        else {
            Issue.record("the name looked up went, or the one never looked up stayed")
            return
        }
        let scores = NetworkScores(limits: .init(maximumNames: 2, maximumNetworksPerName: 3, maximumAddresses: 2))
        for n in 0..<50 {
            scores.record(
                host: "h\(n % 5).test", network: network(n), address: IPAddress(ipv4: 192, 0, 2, UInt8(n)),
                connect: .milliseconds(5))
        }
        #expect(scores.size.names <= 2 && scores.size.networks <= 6)
    }

    @Test("the ECS option reads and writes as RFC 7871 §6 says")
    func optionWire() throws {
        let network = try Self.network("198.51.100.0/22")
        let data = EDNSClientSubnet.optionData(network, scope: 20)
        #expect(data == [0, 1, 22, 20, 198, 51, 100])
        let read = try EDNSClientSubnet.read(data[...])
        #expect(read.subnet == network && read.scope == 20)
        let six = try Self.network("2001:db8:1::/48")
        #expect(EDNSClientSubnet.optionData(six) == [0, 2, 48, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1])
        #expect(throws: EDNSClientSubnet.Malformed.self) {
            try EDNSClientSubnet.read([0, 1, 33, 0, 1, 2, 3, 4, 5][...])
        }
        #expect(throws: EDNSClientSubnet.Malformed.self) { try EDNSClientSubnet.read([0, 1, 0, 0, 1][...]) }
        #expect(
            IPNetwork(try #require(IPAddress("::ffff:198.51.100.7")), prefixLength: 24).description == "198.51.100.0/24"
        )
        #expect(try Self.network("198.51.100.0/24").contains(try Self.network("198.51.100.128/25")))
        #expect(!(try Self.network("198.51.100.0/24").contains(try Self.network("198.51.0.0/16"))))
    }
}

@Suite("HTTP DNS server: network scores kept across restarts")
struct NetworkScoresPersistenceTests {
    @Test("a scores file that is garbage, far too large or missing is ignored: the service starts without scores")
    func hostileFiles() async throws {
        let resolver = HostResolver(upstreams: [], cache: HostCache(), prober: nil)
        let service = HTTPDNSService(
            resolver: resolver, logger: Logger(label: "t", factory: { _ in SwiftLogNoOpLogHandler() }))
        let garbage = try TemporaryFiles.file("{\"version\": 1, \"savedAt\": \"soon\"", name: "garbage.networks")
        service.loadNetworkScores(from: garbage)
        // A sparse file of 65 MiB: its size alone refuses it.
        let huge = TemporaryFiles.path("huge.networks")
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: huge))
        try handle.truncate(atOffset: 65 << 20)
        try handle.close()
        service.loadNetworkScores(from: huge)
        service.loadNetworkScores(from: TemporaryFiles.path("missing.networks"))
        #expect(service.networkScores.size.names == 0)
        await resolver.shutdown()
    }

    @Test("a snapshot comes back with its ages; one from the future or past the window brings nothing")
    func snapshotRoundTrip() throws {
        let scores = NetworkScores()
        let network = try #require(IPNetwork("198.51.100.0/24"))
        let fast = IPAddress(ipv4: 192, 0, 2, 2)
        let slow = IPAddress(ipv4: 192, 0, 2, 1)
        scores.record(host: "steer.test", network: network, address: fast, connect: .milliseconds(3))
        scores.record(host: "steer.test", network: network, address: slow, connect: nil)
        let snapshot = scores.snapshot(at: .init(wall: 1_000_000, boot: 500, bootID: "boot-1"))
        #expect(snapshot.scores.count == 2)
        let data = try JSONEncoder().encode(snapshot)
        let read = try JSONDecoder().decode(NetworkScores.Snapshot.self, from: data)
        let ranked = [slow, fast].enumerated().map { index, ip in
            RankedAddress(ip: ip, rank: index + 1, score: 250, latencyMilliseconds: nil, successes: 0, failures: 0)
        }
        let restored = NetworkScores()
        #expect(restored.restore(read, at: .init(wall: 1_000_060, boot: 560, bootID: "boot-2")) == 2)
        #expect(restored.order(ranked, host: "steer.test", network: network)?.map(\.ip) == [fast, slow])
        #expect(restored.hasScores("steer.test") && restored.generation > 0)
        // After a restart, written "later" than now (a clock set back): nothing is believed. An hour and more ago:
        // all expired. In the same boot the boot clock counts, whatever the wall clock says.
        #expect(NetworkScores().restore(read, at: .init(wall: 999_000, boot: 20, bootID: "boot-2")) == 0)
        #expect(NetworkScores().restore(read, at: .init(wall: 1_000_000 + 3_700, boot: 20, bootID: "boot-2")) == 0)
        #expect(NetworkScores().restore(read, at: .init(wall: 999_000, boot: 560, bootID: "boot-1")) == 2)
        #expect(NetworkScores().restore(read, at: .init(wall: 1_000_060, boot: 4_300, bootID: "boot-1")) == 0)
        // Damaged records are skipped, not trusted.
        var damaged = read
        damaged.scores[0].network = "not a network"
        damaged.scores[1].connectMs = .infinity
        let partial = NetworkScores()
        #expect(partial.restore(damaged, at: .init(wall: 1_000_001, boot: 0, bootID: nil)) == 1)
    }
}
