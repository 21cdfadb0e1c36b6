import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// DNS-over-HTTPS (RFC 8484) against a real dnsdist forwarding to the dnsmasq of the c-ares tests.
@Suite("DNS-over-HTTPS against dnsdist")
struct DoHResolverTests {
    /// Runs `body` with dnsmasq, dnsdist (plain HTTP, plus TLS for `tlsName` with a test CA) and a transport.
    ///
    /// The timeouts are long so that a loaded machine never turns an expected answer into a timeout; refused
    /// connections and certificate failures are reported at once whatever the connect timeout.
    static func withDoH(
        tlsName: String? = nil,
        trustCA: Bool = true,
        timeout: Duration = .seconds(30),
        _ body: (DNSMasq, DNSDist, HTTPDNSTransport) async throws -> Void
    ) async throws {
        try await DNSMasq.with { dnsmasq in
            let certificates = try TestCertificates()
            defer { certificates.remove() }
            let leaf = try tlsName.map { try certificates.leaf(for: $0) }
            let dnsdist = try await DNSDist.start(backend: dnsmasq.address, certificate: leaf)
            defer { dnsdist.stop() }
            let transport = try HTTPDNSTransport(
                configuration: .init(
                    requestTimeout: timeout,
                    connectTimeout: timeout,
                    additionalTrustRoots: trustCA && leaf != nil ? [certificates.caPath] : []
                )
            )
            do {
                try await body(dnsmasq, dnsdist, transport)
            } catch {
                await transport.shutdown()
                throw error
            }
            await transport.shutdown()
        }
    }

    static func doh(
        _ url: String,
        method: HTTPDNSResolver.API.DoHMethod = .get,
        bootstrap: [String] = [],
        allowNonPublic: Bool = false,
        transport: HTTPDNSTransport
    ) throws -> HTTPDNSResolver {
        let endpoint = try HTTPDNSEndpoint(url, bootstrapAddresses: bootstrap.compactMap(IPAddress.init))
        return try HTTPDNSResolver(
            configuration: .init(
                api: .dnsMessage(method: method),
                endpoints: [endpoint],
                allowNonPublicAddresses: allowNonPublic
            ),
            transport: transport
        )
    }

    static func summary(_ resolution: Resolution) -> [String] {
        resolution.addresses.map { "\($0.ip) \($0.ttl)" }.sorted()
    }

    /// The sorted addresses with TTLs and sources stripped, or the error code.
    static func outcome(_ body: () async throws -> Resolution) async -> [String] {
        do {
            return summary(try await body())
        } catch let error as HTTPDNSError {
            return ["error: \(error.code)"]
        } catch {
            return ["error: \(error)"]
        }
    }

    @Test(
        "GET and POST give the same addresses and TTLs as c-ares against the dnsmasq behind dnsdist",
        arguments: HTTPDNSResolver.API.DoHMethod.allCases)
    func sameAsCAres(method: HTTPDNSResolver.API.DoHMethod) async throws {
        try await Self.withDoH { dnsmasq, dnsdist, transport in
            let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address]))
            let doh = try Self.doh(dnsdist.httpURL, method: method, transport: transport)
            for name in ["multi.test", "alias.test", "v4only.test", "v6only.test", "UPPER.test"] {
                for family in AddressFamily.allCases {
                    let expected = await Self.outcome { try await cares.resolve(try HostName(name), family: family) }
                    let answer = await Self.outcome { try await doh.resolve(try HostName(name), family: family) }
                    #expect(answer == expected, "\(name) \(family)")
                    #expect(!answer.contains("error: ") || answer.contains("noData"), "\(answer)")
                }
            }
            let any = try await doh.resolve(try HostName("multi.test"), family: .any)
            #expect(any.addresses.prefix(2).allSatisfy { $0.ip.family == .ipv4 }, "IPv4 first")
            #expect(any.addresses.allSatisfy { $0.source.name == "doh" && $0.ttl == 300 })
        }
    }

    @Test(
        "NXDOMAIN, NODATA, CNAME-only and REFUSED each give their own code",
        arguments: HTTPDNSResolver.API.DoHMethod.allCases)
    func negativeAnswers(method: HTTPDNSResolver.API.DoHMethod) async throws {
        try await Self.withDoH { _, dnsdist, transport in
            let doh = try Self.doh(dnsdist.httpURL, method: method, transport: transport)
            let missing = await expectDNSError(.notFound) {
                try await doh.resolve(try HostName("nope.test"), family: .any)
            }
            #expect(missing?.host == "nope.test")
            #expect(missing?.servers == ["127.0.0.1:\(dnsdist.httpPort)"])
            await expectDNSError(.noData) { try await doh.resolve(try HostName("v4only.test"), family: .ipv6) }
            await expectDNSError(.noData) { try await doh.resolve(try HostName("dangling.test"), family: .ipv4) }
            // dnsmasq refuses names outside its local zone.
            await expectDNSError(.refused) { try await doh.resolve(try HostName("outside.invalid"), family: .ipv4) }
        }
    }

    @Test("the private-address guard rejects private answers unless the provider allows them")
    func privateAddressGuard() async throws {
        try await Self.withDoH { _, dnsdist, transport in
            let guarded = try Self.doh(dnsdist.httpURL, transport: transport)
            let error = await expectDNSError(.privateAddress) {
                try await guarded.resolve(try HostName("n5.test"), family: .ipv4)
            }
            #expect(error?.message.contains("10.1.0.5") == true)
            let open = try Self.doh(dnsdist.httpURL, allowNonPublic: true, transport: transport)
            let answer = try await open.resolve(try HostName("n5.test"), family: .ipv4)
            #expect(answer.addresses.map(\.ip.description) == ["10.1.0.5"])
        }
    }

    @Test("TLS with HTTP/2 through a bootstrap IP: the certificate is checked against the endpoint's name")
    func tls() async throws {
        try await Self.withDoH(tlsName: "doh.test") { _, dnsdist, transport in
            let url = try #require(dnsdist.httpsURL)
            let doh = try Self.doh(url, bootstrap: ["127.0.0.1"], transport: transport)
            let answer = try await doh.resolve(try HostName("multi.test"), family: .any)
            #expect(Set(answer.addresses.map(\.ip.description)) == Set(TestZone.multiV4 + TestZone.multiV6))
            // The name in the URL must match the certificate; connecting by IP cannot pass.
            let byIP = try Self.doh("https://127.0.0.1:\(dnsdist.httpsPort!)/dns-query", transport: transport)
            await expectDNSError(.certificateRejected) {
                try await byIP.resolve(try HostName("multi.test"), family: .ipv4)
            }
        }
    }

    @Test(
        "a resolver made by hand owns its connections: its own trust roots, closed at shutdown; a shared transport outlives its resolvers"
    )
    func ownedConnections() async throws {
        try await DNSMasq.with { dnsmasq in
            let certificates = try TestCertificates()
            defer { certificates.remove() }
            let leaf = try certificates.leaf(for: "doh.test")
            let dnsdist = try await DNSDist.start(backend: dnsmasq.address, certificate: leaf)
            defer { dnsdist.stop() }
            let endpoint = try HTTPDNSEndpoint(
                try #require(dnsdist.httpsURL), bootstrapAddresses: [try #require(IPAddress("127.0.0.1"))])
            let configuration = HTTPDNSResolver.Configuration(
                api: .dnsMessage(), endpoints: [endpoint], allowNonPublicAddresses: true)
            let connections = HTTPDNSTransport.Configuration(
                requestTimeout: .seconds(30), connectTimeout: .seconds(30), additionalTrustRoots: [certificates.caPath])
            let name = try HostName("multi.test")

            let owner = try HTTPDNSResolver(configuration: configuration, transportConfiguration: connections)
            #expect(!(try await owner.resolve(name, family: .ipv4)).addresses.isEmpty)
            // The same server without the transport's trust root: the roots are the resolver's own.
            var untrusted = connections
            untrusted.additionalTrustRoots = []
            let stranger = try HTTPDNSResolver(configuration: configuration, transportConfiguration: untrusted)
            await expectDNSError(.certificateRejected) { try await stranger.resolve(name, family: .ipv4) }
            await stranger.shutdown()
            var unreadable = connections
            unreadable.additionalTrustRoots = ["/nonexistent/ca.pem"]
            #expect(throws: HTTPDNSError.self) {
                try HTTPDNSResolver(configuration: configuration, transportConfiguration: unreadable)
            }
            await owner.shutdown()
            await expectDNSError(.shutdown) { try await owner.resolve(name, family: .ipv4) }
            await owner.shutdown()  // twice is harmless

            // Resolvers on a shared transport leave it to its owner.
            let transport = try HTTPDNSTransport(configuration: .init(additionalTrustRoots: [certificates.caPath]))
            let first = try HTTPDNSResolver(configuration: configuration, transport: transport)
            let second = try HTTPDNSResolver(configuration: configuration, transport: transport)
            #expect(!(try await first.resolve(name, family: .ipv4)).addresses.isEmpty)
            await first.shutdown()
            #expect(!(try await second.resolve(name, family: .ipv6)).addresses.isEmpty)
            await transport.shutdown()
            await expectDNSError(.shutdown) { try await second.resolve(name, family: .ipv4) }
        }
    }

    @Test("an untrusted CA and a certificate for another name fail with certificateRejected, as in the fronts")
    func tlsFailures() async throws {
        try await Self.withDoH(tlsName: "doh.test", trustCA: false) { _, dnsdist, transport in
            let doh = try Self.doh(try #require(dnsdist.httpsURL), bootstrap: ["127.0.0.1"], transport: transport)
            await expectDNSError(.certificateRejected) {
                try await doh.resolve(try HostName("multi.test"), family: .ipv4)
            }
        }
        try await Self.withDoH(tlsName: "other.test") { _, dnsdist, transport in
            let url = "https://doh.test:\(dnsdist.httpsPort!)/dns-query"
            let doh = try Self.doh(url, bootstrap: ["127.0.0.1"], transport: transport)
            let error = await expectDNSError(.certificateRejected) {
                try await doh.resolve(try HostName("multi.test"), family: .ipv4)
            }
            #expect(error?.servers == ["127.0.0.1:\(dnsdist.httpsPort!)"])
        }
    }

    @Test("bootstrap addresses and endpoints are tried in turn")
    func failover() async throws {
        try await Self.withDoH { _, dnsdist, transport in
            // 127.0.0.2 has nothing listening on the port: refused, then 127.0.0.1 answers.
            let url = "http://doh.test:\(dnsdist.httpPort)/dns-query"
            let doh = try Self.doh(url, bootstrap: ["127.0.0.2", "127.0.0.1"], transport: transport)
            let answer = try await doh.resolve(try HostName("v4only.test"), family: .ipv4)
            #expect(answer.addresses.map(\.ip.description) == ["192.0.2.10"])

            let deadPort = try FreePort.tcp()
            let endpoints = [
                try HTTPDNSEndpoint("http://127.0.0.1:\(deadPort)/dns-query"),
                try HTTPDNSEndpoint(dnsdist.httpURL),
            ]
            let twoEndpoints = try HTTPDNSResolver(
                configuration: .init(api: .dnsMessage(), endpoints: endpoints), transport: transport)
            #expect(try await twoEndpoints.resolve(try HostName("v4only.test"), family: .ipv4).addresses.count == 1)

            // A refused connect must fail at once: were it retried until the connect timeout (as long as the
            // request timeout here), the lookup would end in `timeout` instead.
            let allDead = try HTTPDNSResolver(
                configuration: .init(api: .dnsMessage(), endpoints: [endpoints[0], endpoints[0]]), transport: transport)
            let error = await expectDNSError(.connectionFailed) {
                try await allDead.resolve(try HostName("v4only.test"), family: .ipv4)
            }
            #expect(error?.servers.count == 2)
        }
    }

    @Test("many concurrent lookups share the transport")
    func concurrency() async throws {
        try await Self.withDoH(tlsName: "doh.test") { _, dnsdist, transport in
            let doh = try Self.doh(
                try #require(dnsdist.httpsURL), bootstrap: ["127.0.0.1"], allowNonPublic: true, transport: transport)
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let answer = try await doh.resolve(try HostName("n\(index).test"), family: .ipv4)
                        return answer.addresses.map(\.ip.description) == [TestZone.bulkAddress(index)]
                    }
                }
                for try await ok in group { #expect(ok) }
            }
        }
    }
}
