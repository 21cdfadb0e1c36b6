import Foundation
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// HTTPS records that agree with the A and AAAA answers, end to end: PowerDNS serves `www.ecs.test` A and AAAA by the
/// client's network and an HTTPS record whose hints no network gets; `hostsctl`'s service relays the record with its
/// hints made the addresses the same client network gets for A and AAAA, port, ALPN and ECH as they came; an
/// overridden name gets a record of the service's own. Asked over UDP by hand, by kdig and by dnspython, with EDNS
/// Client Subnet on and off.
@Suite("HTTPS records agree with the steering")
struct ServiceBindingSteeringTests {
    static let logger = Logger(label: "svcb-steering-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// PowerDNS behind a service that relays other types, with `override.ecs.test` overridden.
    struct Lab {
        let pdns: PowerDNS
        let resolver: HostResolver
        let server: HTTPDNSServer
        var port: Int { server.dnsPort ?? 0 }

        static func start(ecs: HTTPDNSService.Configuration.ClientSubnetMode) async throws -> Lab {
            let pdns = try await PowerDNS.start()
            let cares = try CAresResolver(configuration: .init(servers: [pdns.address], timeout: .seconds(2)))
            let overrides = HostOverrides()
            overrides.set(
                [try #require(IPAddress("192.0.2.77")), try #require(IPAddress("2001:db8::77"))],
                for: try HostPattern("override.ecs.test"))
            // The target of svc.ecs.test's record, whose ECH keys an override's host does not hold.
            overrides.set([try #require(IPAddress("192.0.2.88"))], for: try HostPattern("target.ecs.test"))
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], overrides: overrides,
                cache: HostCache(), prober: nil, onShutdown: [{ cares.shutdown() }])
            let service = HTTPDNSService(
                resolver: resolver,
                configuration: .init(
                    otherTypes: .forward, clientSubnetMode: ecs, httpsRecordALPN: ["h2", "h3"], httpsRecordPort: 8443),
                logger: logger, forwarder: CAresForwarder(resolver: cares))
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    port: 0, dnsListen: ServerAddress(ip: try #require(IPAddress("127.0.0.1")), port: 0)),
                logger: logger)
            return Lab(pdns: pdns, resolver: resolver, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            pdns.stop()
        }

        /// The records of `name` of `type` as the service answers the client network `subnet` (none: the server's own
        /// view), over UDP.
        func ask(_ name: String, type: UInt16, subnet: String?) async throws -> [DNSRecordText.Record] {
            let query = ClientSubnetTests.query(name, type: type, subnet: try subnet.map(ClientSubnetTests.network))
            let answer = try await ClientSubnetTests.udp(port, query)
            return try #require(DNSRecordText.answer(answer)).records
        }

        /// The hints of the one HTTPS record of `name`, and the record's data, for `subnet`.
        func binding(_ name: String, subnet: String?) async throws -> ServiceBinding {
            let query = ClientSubnetTests.query(name, type: 65, subnet: try subnet.map(ClientSubnetTests.network))
            let answer = try await ClientSubnetTests.udp(port, query)
            let record = ServiceBindingAnswer.sections(answer)?.1.answers.first { $0.type == 65 }
            let found = record.flatMap { try? ServiceBinding(rdata: answer[$0.data]) }
            return try #require(found, "no HTTPS record in \(answer)")
        }
    }

    @Test(
        "for every client network the hints are what it gets for A and AAAA, in order; port, ALPN and ECH as they came",
        arguments: [HTTPDNSService.Configuration.ClientSubnetMode.on, .off])
    func hintsFollowTheSteering(ecs: HTTPDNSService.Configuration.ClientSubnetMode) async throws {
        let lab = try await Lab.start(ecs: ecs)
        // Asked twice each: the relayed answer, then the kept one (steered from the cache at once).
        for subnet in ["198.51.100.0/24", "203.0.113.0/24", nil] as [String?] {
            for _ in 0..<2 {
                let a = try await lab.ask("www.ecs.test", type: 1, subnet: subnet).map(\.data)
                let aaaa = try await lab.ask("www.ecs.test", type: 28, subnet: subnet).map(\.data)
                let www = try await lab.binding("www.ecs.test", subnet: subnet)
                #expect(www.ipv4Hints.map(\.description) == a, "\(ecs) \(subnet ?? "-")")
                #expect(www.ipv6Hints.map(\.description) == aaaa, "\(ecs) \(subnet ?? "-")")
                #expect(www.alpn == ["h2"] && www.priority == 1 && www.target == ".")
                // A record pointing at another name: that name's addresses; the rest kept.
                let elsewhere = try await lab.binding("elsewhere.ecs.test", subnet: subnet)
                #expect(elsewhere.ipv4Hints.map(\.description) == a && elsewhere.ipv6Hints.map(\.description) == aaaa)
                #expect(
                    elsewhere.port == 8443 && elsewhere.alpn == ["h3"] && elsewhere.ech == [1, 2, 3, 4, 5, 6, 7, 8])
                #expect(elsewhere.target == "www.ecs.test.")
            }
        }
        // The networks' addresses differ only with the client subnet on.
        let first = try await lab.binding("www.ecs.test", subnet: "198.51.100.0/24").ipv4Hints.map(\.description)
        #expect(first == (ecs == .on ? ["192.0.2.1"] : ["192.0.2.9"]))
        // AliasMode is relayed as it is: the client asks for its target next, which is steered.
        let alias = try await lab.ask("pool.ecs.test", type: 65, subnet: nil)
        #expect(alias.map(\.data) == ["0 svc.ecs.test."])
        // A name without addresses: its hints go rather than send clients where A and AAAA do not.
        let unaddressed = try await lab.binding("lonely.ecs.test", subnet: nil)
        #expect(unaddressed.ipv4Hints.isEmpty && unaddressed.ipv6Hints.isEmpty && unaddressed.alpn == ["h2"])
        // A target with IPv4 only: its IPv4 hint, no IPv6 hint, and the record keeps a TTL (no empty answer's 0).
        let flat = try await lab.ask("flatsvc.ecs.test", type: 65, subnet: nil)
        #expect(flat.map(\.data) == ["1 flat.ecs.test. alpn=\"h2\" ipv4hint=192.0.2.50"])
        #expect(flat.first.map { $0.ttl > 0 } ?? false, "\(flat)")
        // A target the overrides answer: their addresses, and no ECH (the override's host holds no such keys); the
        // port and the mandatory keys as they came.
        let overridden = try await lab.binding("svc.ecs.test", subnet: nil)
        #expect(overridden.ipv4Hints.map(\.description) == ["192.0.2.88"] && overridden.ipv6Hints.isEmpty)
        #expect(overridden.ech == nil && overridden.port == 8443 && overridden.mandatory == [1, 3])
        // ANY is declined (it would carry records past the steering); resolver.arpa is not forwarded (RFC 9462).
        let any = try await ClientSubnetTests.udp(
            lab.port, ClientSubnetTests.query("www.ecs.test", type: 255, subnet: nil))
        #expect(any[3] & 0x0F == 4, "NOTIMP")
        let ddr = try await ClientSubnetTests.udp(
            lab.port, ClientSubnetTests.query("_dns.resolver.arpa", type: 64, subnet: nil))
        #expect(ddr[3] & 0x0F == 0 && ddr[6] == 0 && ddr[7] == 0, "NOERROR, nothing designated")
        await lab.stop()
    }

    @Test(
        "an overridden name's HTTPS record is the service's: the override's addresses, the settings' port and ALPN"
    )
    func overriddenName() async throws {
        let lab = try await Lab.start(ecs: .on)
        let records = try await lab.ask("override.ecs.test", type: 65, subnet: "198.51.100.0/24")
        #expect(records.map(\.data) == [#"1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.77 ipv6hint=2001:db8::77"#])
        // SVCB (whose ALPN identifiers are not HTTP's) is relayed and steered: the upstream has none.
        #expect(try await lab.ask("override.ecs.test", type: 64, subnet: "198.51.100.0/24").isEmpty)
        await lab.stop()
    }

    @Test("kdig and dnspython see hints that agree with A and AAAA, stating their networks by ECS")
    func otherClients() async throws {
        let lab = try await Lab.start(ecs: .on)
        let kdig = try await HostsCTLProcess.run(
            executable: "/usr/bin/kdig",
            [
                "@127.0.0.1", "-p", "\(lab.port)", "+subnet=203.0.113.0/24", "+short", "+timeout=10", "+retry=0",
                "HTTPS", "www.ecs.test",
            ])
        #expect(kdig.standardOutput.contains("ipv4hint=192.0.2.2 ipv6hint=2001:db8::9"), "\(kdig.standardOutput)")
        let script = """
            import sys, dns.message, dns.query, dns.rdatatype, dns.edns, dns.rdtypes.svcbbase
            port = int(sys.argv[1])
            def ask(name, rdtype, subnet):
                option = dns.edns.ECSOption.from_text(subnet)
                query = dns.message.make_query(name, rdtype, use_edns=0, options=[option])
                return dns.query.udp(query, "127.0.0.1", port=port, timeout=10)
            for subnet in ["198.51.100.0/24", "203.0.113.0/24", "192.0.2.0/24"]:
                a = [r.address for rrset in ask("www.ecs.test", "A", subnet).answer for r in rrset]
                aaaa = [r.address for rrset in ask("www.ecs.test", "AAAA", subnet).answer for r in rrset]
                https = [r for rrset in ask("www.ecs.test", "HTTPS", subnet).answer for r in rrset]
                params = https[0].params
                v4 = [str(x) for x in params[dns.rdtypes.svcbbase.ParamKey.IPV4HINT].addresses]
                v6 = [str(x) for x in params[dns.rdtypes.svcbbase.ParamKey.IPV6HINT].addresses]
                print(subnet, "agree" if (v4, v6) == (a, aaaa) else "differ", v4, a, v6, aaaa)
            """
        let file = try TemporaryFiles.file(script, name: "https-hints.py")
        let output = try await HostsCTLProcess.run(executable: "/usr/bin/env", ["python3", file, "\(lab.port)"])
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput.components(separatedBy: " agree ").count == 4, "\(output.standardOutput)")
        await lab.stop()
    }

    @Test("the wire rewrite: names written in full, signatures over the records dropped, AD cleared, OPT kept")
    func rewrite() throws {
        // www.test HTTPS: a CNAME to edge.test (compressed), edge.test HTTPS 1 . ipv4hint=192.0.2.1, an RRSIG over
        // HTTPS, glue in the additional section, and an OPT record.
        let header: [UInt8] = [0x12, 0x34, 0x81, 0xA0, 0, 1, 0, 3, 0, 0, 0, 2]
        let question: [UInt8] = [3] + Array("www".utf8) + [4] + Array("test".utf8) + [0, 0, 65, 0, 1]
        let cname: [UInt8] = [0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 7, 4] + Array("edge".utf8) + [0xC0, 16]
        let edge = 12 + question.count + 12  // where "edge" starts in the CNAME's data
        var binding = ServiceBinding(priority: 1)
        binding.ipv4Hints = [IPAddress("192.0.2.1")!]
        let data = binding.rdata
        let https: [UInt8] =
            [0xC0, UInt8(edge), 0, 65, 0, 1, 0, 0, 1, 44, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
        let rrsig: [UInt8] = [0xC0, UInt8(edge), 0, 46, 0, 1, 0, 0, 1, 44, 0, 4, 0, 65, 8, 2]
        let glue: [UInt8] = [0xC0, UInt8(edge), 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]
        let opt: [UInt8] = [0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]
        let message = header + question + cname + https + rrsig + glue + opt
        #expect(ServiceBindingAnswer.hintedNames(in: message) == ["edge.test"])
        let steered = try #require(
            ServiceBindingAnswer.steering(
                message, hints: ["edge.test": .init(ipv4: [IPAddress("192.0.2.9")!], ipv6: [], ttl: 30)]))
        #expect(steered[3] & 0x20 == 0, "AD cleared")
        #expect(Array(steered[6..<12]) == [0, 2, 0, 0, 0, 1], "two answers, no authority, the OPT record alone")
        let records = try #require(DNSRecordText.answer(steered)).records
        #expect(records.map(\.name) == ["www.test.", "edge.test."])
        #expect(records.map(\.data) == ["edge.test.", "1 . ipv4hint=192.0.2.9"])
        #expect(records.map(\.ttl) == [60, 30])
        #expect(Array(steered.suffix(opt.count)) == opt)
        // A record that cannot be read (its keys out of order) is left out, its hints with it.
        let broken: [UInt8] = [0, 1, 0, 0, 4, 0, 4, 10, 0, 0, 1, 0, 1, 0, 3, 2, 104, 50]
        let malformed =
            header.prefix(7) + [1] + header.suffix(4).prefix(2) + [0, 0] + question
            + [0xC0, 12, 0, 65, 0, 1, 0, 0, 1, 44, 0, UInt8(broken.count)] + broken
        let cleaned = try #require(ServiceBindingAnswer.steering(Array(malformed), hints: [:]))
        #expect(Array(cleaned[6..<8]) == [0, 0], "no answer left")
        // Names written in full could make the answer outgrow a stream's two-byte length: 300 records owned by a
        // pointer to a 250-byte name would take 78 KB. The rebuild refuses rather than sending the original.
        var long: [UInt8] = []
        for _ in 0..<5 { long += [49] + [UInt8](repeating: 97, count: 49) }
        long.append(0)
        let bigHeader: [UInt8] = [0, 1, 0x81, 0x80, 0, 1, 0x01, 0x2D, 0, 0, 0, 0]
        let cnameHead: [UInt8] = [0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, UInt8(long.count)]
        var big = bigHeader + question
        big += cnameHead
        big += long
        let longAt = big.count - long.count
        for index in 0..<300 {
            big += [0xC0 | UInt8(longAt >> 8), UInt8(longAt & 0xFF), 0, 16, 0, 1, 0, 0, 0, 60, 0, 3]
            big += [2, UInt8(index >> 8), UInt8(index & 0xFF)]
        }
        #expect(ServiceBindingAnswer.steering(big, hints: [:]) == nil)
        // The CNAME's target written in full, where the original pointed back at the question.
        let fullTarget: [UInt8] = [0, 11, 4] + Array("edge".utf8) + [4] + Array("test".utf8) + [0]
        #expect(steered.firstRange(of: fullTarget) != nil)
    }
}
