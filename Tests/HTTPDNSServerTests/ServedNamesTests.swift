import Foundation
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// What the service does with the names and messages clients send: answers for the name as written (no search
/// domain, ASCII case only), relays only what it should, and never lets an answer make the server probe its own
/// network. Against a real dnsmasq through c-ares.
@Suite("HTTP DNS service: served names, forwarding and probing")
struct ServedNamesTests {
    static let logger = Logger(label: "served-names-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    static func resolver(_ dnsmasq: DNSMasq, search: [String] = [], ndots: Int = 1, prober: (any ConnectProber)? = nil)
        throws -> HostResolver
    {
        let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(2)))
        var probing = HostResolver.Probing(ports: [443], interval: .seconds(60), timeout: .milliseconds(200))
        probing.probesGuardedAddresses = false
        return HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], cache: HostCache(), prober: prober,
            configuration: .parts(probing: prober == nil ? nil : probing, search: search, ndots: ndots),
            onShutdown: [{ cares.shutdown() }])
    }

    /// An RFC 8484 message: one question for `labels` (each written as one wire label), then `additional` bytes.
    static func message(labels: [String], type: UInt16, questionClass: UInt16 = 1, additional: [UInt8] = [])
        -> [UInt8]
    {
        let records: UInt16 = additional.isEmpty ? 0 : 1
        var bytes: [UInt8] = [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, UInt8(records >> 8), UInt8(records & 0xFF)]
        for label in labels { bytes += [UInt8(label.utf8.count)] + Array(label.utf8) }
        bytes += [0, UInt8(type >> 8), UInt8(type & 0xFF), UInt8(questionClass >> 8), UInt8(questionClass & 0xFF)]
        return bytes + additional
    }

    static func post(_ message: [UInt8]) -> ServiceRequest {
        ServiceRequest(method: "POST", target: "/dns-query", contentType: "application/dns-message", body: message)
    }

    @Test("a served name is absolute: no search domain is tried, however few dots it has")
    func noSearchDomains() async throws {
        let dnsmasq = try await DNSMasq.start(records: TestZone.records + ["host-record=db.corp.test,192.0.2.50,300"])
        defer { dnsmasq.stop() }
        let resolver = try Self.resolver(dnsmasq, search: ["corp.test"], ndots: 5)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let json = await service.handle(ServiceRequest(method: "GET", target: "/resolve?name=db"))
        let text = String(decoding: json.body, as: UTF8.self)
        #expect(!text.contains("192.0.2.50"), "an internal name leaked through a search domain: \(text)")
        #expect(!text.contains("\"Status\":0"), "db. itself has no address (dnsmasq knows no such name)")
        let wire = await service.handle(Self.post(Self.message(labels: ["db"], type: 1)))
        #expect(wire.body.count >= 8 && wire.body[3] & 0x0F != 0 && wire.body[7] == 0, "no answer for db")
        // The application-side resolver still searches: the difference is the server's alone.
        #expect(try await resolver.resolveRanked("db").addresses.map(\.ip.description) == ["192.0.2.50"])
        await resolver.shutdown()
    }

    @Test("a POST's content type: application/dns-message in any ASCII case, with parameters and blanks; nothing else")
    func postContentTypes() async throws {
        let resolver = HostResolver(upstreams: [], cache: nil, prober: nil)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let message = Self.message(labels: ["localhost"], type: 1)
        for (type, status) in [
            ("application/dns-message", 200), (" Application/DNS-Message ; charset=x", 200),
            ("application/dns-message\t;q=1", 200), ("application/dns-messagex", 415), ("application/dns", 415),
            ("text/plain", 415), ("", 415), ("application\u{0F}dns-message", 415),
        ] {
            let response = await service.handle(
                ServiceRequest(method: "POST", target: "/dns-query", contentType: type, body: message))
            #expect(response.status == status, "\(type)")
        }
        await resolver.shutdown()
    }

    @Test("names are lower-cased in ASCII only; a wire label holding a dot is refused, not split")
    func asciiNames() async throws {
        let dnsmasq = try await DNSMasq.start(records: TestZone.records + ["host-record=k.test,192.0.2.60,300"])
        defer { dnsmasq.stop() }
        let resolver = try Self.resolver(dnsmasq)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        // U+212A KELVIN SIGN lower-cases to "k" under Unicode rules.
        let kelvin = await service.handle(ServiceRequest(method: "GET", target: "/resolve?name=%E2%84%AA.test"))
        #expect(!String(decoding: kelvin.body, as: UTF8.self).contains("192.0.2.60"))
        let upper = await service.handle(ServiceRequest(method: "GET", target: "/resolve?name=K.TEST"))
        #expect(String(decoding: upper.body, as: UTF8.self).contains("192.0.2.60"), "ASCII case still folds")
        let kelvinWire = await service.handle(Self.post(Self.message(labels: ["\u{212A}", "test"], type: 1)))
        #expect(kelvinWire.body[3] & 0x0F != 0 || kelvinWire.body[7] == 0, "no answer for the Kelvin sign")
        // "multi.test" as one label is not the two labels multi and test.
        let dotted = await service.handle(Self.post(Self.message(labels: ["multi.test"], type: 1)))
        #expect(dotted.status == 200 && dotted.body[3] & 0x0F == 5 && dotted.body[7] == 0, "REFUSED")
        let plain = await service.handle(Self.post(Self.message(labels: ["multi", "test"], type: 1)))
        #expect(plain.body[3] & 0x0F == 0 && plain.body[7] == 2)
        await resolver.shutdown()
    }

    /// Records what it is asked to forward, and answers as told.
    final class RecordingForwarder: DNSMessageForwarder {
        enum Behaviour: Sendable {
            case echo
            case refuse
            case wait(Duration)
        }

        let behaviour: Behaviour
        let sent = Locked<[[UInt8]]>([])

        init(_ behaviour: Behaviour) { self.behaviour = behaviour }

        func forward(_ query: [UInt8]) async throws -> [UInt8] {
            sent.withLock { $0.append(query) }
            switch behaviour {
            case .echo:
                var answer = query
                answer[2] |= 0x80
                return answer
            case .refuse:
                throw HTTPDNSError(code: .refused, message: "every upstream refused")
            case .wait(let delay):
                try await Task.sleep(for: delay)
                var answer = query
                answer[2] |= 0x80
                return answer
            }
        }
    }

    @Test(
        "forwarding: class IN only, no PTR into guarded ranges, the client's ECS stripped, outstanding queries bounded, REFUSED kept"
    )
    func forwarding() async throws {
        let dnsmasq = try await DNSMasq.start()
        defer { dnsmasq.stop() }
        let resolver = try Self.resolver(dnsmasq)
        let forwarder = RecordingForwarder(.echo)
        // ECS off: the client's option is removed and none sent (ClientSubnetTests covers relaying with ECS on).
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(otherTypes: .forward, clientSubnetMode: .off),
            logger: Self.logger, forwarder: forwarder)
        func rcode(_ response: ServiceResponse) -> UInt8 { response.body.count > 3 ? response.body[3] & 0x0F : 0xFF }
        // CHAOS TXT version.bind: refused, never relayed.
        let chaos = await service.handle(
            Self.post(Self.message(labels: ["version", "bind"], type: 16, questionClass: 3)))
        #expect(rcode(chaos) == 5)
        // Reverse lookups into private, loopback and link-local ranges: refused; a public one is relayed.
        for name in ["5.0.0.10", "1.0.0.127", "9.9.254.169", "1.1.168.192"] {
            let ptr = await service.handle(
                Self.post(
                    Self.message(labels: name.split(separator: ".").map(String.init) + ["in-addr", "arpa"], type: 12)))
            #expect(rcode(ptr) == 5, "\(name).in-addr.arpa")
        }
        let loopback6 = Array(repeating: "0", count: 31) + ["1"]
        let ptr6 = await service.handle(
            Self.post(Self.message(labels: loopback6.reversed() + ["ip6", "arpa"], type: 12)))
        #expect(rcode(ptr6) == 5, "::1 under ip6.arpa")
        #expect(forwarder.sent.withLock { $0.isEmpty }, "nothing above was relayed")
        let public4 = await service.handle(
            Self.post(Self.message(labels: ["1", "2", "0", "192", "in-addr", "arpa"], type: 12)))
        #expect(rcode(public4) == 0 && forwarder.sent.withLock { $0.count } == 1)
        // An OPT record with a client subnet (code 8) and a cookie (code 10): both removed (the cookie is the
        // client's hop's, and the relay cache's key does not hold it), the OPT record's size and flags kept.
        let ecs: [UInt8] = [0, 8, 0, 7, 0, 1, 24, 0, 198, 51, 100]
        let cookie: [UInt8] = [0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]
        let options = ecs + cookie
        let opt: [UInt8] = [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, UInt8(options.count)] + options
        let mx = await service.handle(Self.post(Self.message(labels: ["multi", "test"], type: 15, additional: opt)))
        #expect(rcode(mx) == 0)
        let relayed = forwarder.sent.withLock { $0.last } ?? []
        // The server's forwarding marker (4 + 9 bytes) is the one option left.
        #expect(relayed.count == Self.message(labels: ["multi", "test"], type: 15).count + 11 + 13)
        #expect(!relayed.windowsStartingWith(cookie), "the cookie option is gone")
        #expect(ForwardingMarker.read(relayed)?.hops == 1, "marked as forwarded once")
        #expect(!relayed.windowsStartingWithSubnet, "the client subnet option is gone")
        // REFUSED from upstream stays REFUSED.
        let refusing = HTTPDNSService(
            resolver: resolver, configuration: .init(otherTypes: .forward), logger: Self.logger,
            forwarder: RecordingForwarder(.refuse))
        #expect(rcode(await refusing.handle(Self.post(Self.message(labels: ["multi", "test"], type: 15)))) == 5)
        // At most two forwarded queries of one network at once (a sixteenth of 32): the third gets 503 at once
        // while two wait.
        let slow = RecordingForwarder(.wait(.seconds(2)))
        let bounded = HTTPDNSService(
            resolver: resolver, configuration: .init(otherTypes: .forward, maximumForwardedQueries: 32),
            logger: Self.logger, forwarder: slow)
        let query = Self.post(Self.message(labels: ["multi", "test"], type: 15))
        async let first = bounded.handle(query)
        async let second = bounded.handle(query)
        #expect(try await waitUntil { slow.sent.withLock { $0.count } == 2 })
        let third = await bounded.handle(query)
        #expect(third.status == 503, "refused past the bound")
        let (one, two) = await (first, second)
        #expect(rcode(one) == 0 && rcode(two) == 0)
        await resolver.shutdown()
    }

    /// Counts what it relays to another forwarder.
    final class CountingForwarder: DNSMessageForwarder {
        let next: any DNSMessageForwarder
        let count = Locked(0)
        init(_ next: any DNSMessageForwarder) { self.next = next }
        func forward(_ query: [UInt8]) async throws -> [UInt8] {
            count.withLock { $0 += 1 }
            return try await next.forward(query)
        }
    }

    @Test(
        "relayed answers of other types (HTTPS, TXT) are kept while their TTLs run: one upstream query for many clients"
    )
    func forwardedAnswersKept() async throws {
        let dnsmasq = try await DNSMasq.start(
            records: TestZone.records + ["local-ttl=300", "txt-record=info.test,hello", "dns-rr=svc.test,65,000100"])
        defer { dnsmasq.stop() }
        let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(2)))
        defer { cares.shutdown() }
        let forwarder = CountingForwarder(CAresForwarder(resolver: cares))
        let resolver = try Self.resolver(dnsmasq)
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(otherTypes: .forward), logger: Self.logger, forwarder: forwarder)
        func ask(_ labels: [String], type: UInt16, id: UInt16) async -> [UInt8] {
            var message = Self.message(labels: labels, type: type)
            (message[0], message[1]) = (UInt8(id >> 8), UInt8(id & 0xFF))
            return await service.handle(Self.post(message)).body
        }
        for (labels, type) in [(["svc", "test"], UInt16(65)), (["info", "test"], 16)] {
            let before = forwarder.count.withLock { $0 }
            let first = await ask(labels, type: type, id: 1)
            #expect(first.count > 12 && first[3] & 0x0F == 0 && first[7] == 1, "\(labels): one record")
            // Another client, another ID and another case: answered from what was kept.
            let upper = [labels[0].uppercased(), labels[1]]
            let second = await ask(upper, type: type, id: 0x4242)
            #expect(forwarder.count.withLock { $0 } == before + 1, "\(labels): one upstream query")
            #expect(Array(second.prefix(2)) == [0x42, 0x42])
            #expect(Array(second[13..<13 + labels[0].count]) == Array(upper[0].utf8), "the client's question case")
            #expect(second.count == first.count && second[7] == 1)
            let ttl = ForwardedAnswerCache.recordTTLs(second)?.first?.ttl ?? 0
            #expect(ttl > 0 && ttl <= 300)
        }
        // Another type of the same name is another entry.
        _ = await ask(["svc", "test"], type: 16, id: 3)
        #expect(forwarder.count.withLock { $0 } == 3)
        await resolver.shutdown()
    }

    @Test("a kept relayed answer: TTLs lowered by its age, gone at the smallest, DO and flags in the key, no cookies")
    func forwardedAnswerCacheRules() throws {
        let cache = ForwardedAnswerCache()
        let query = Self.message(labels: ["mx", "test"], type: 15)
        // The answer: the question, then one MX record (pointer to the name, TTL 60) and one with TTL 600.
        var answer = query
        answer[2] |= 0x80
        answer[7] = 2
        for ttl in [60, 600] as [UInt32] {
            answer += [0xC0, 12, 0, 15, 0, 1, UInt8(ttl >> 24), UInt8(ttl >> 16 & 0xFF), UInt8(ttl >> 8 & 0xFF)]
            answer += [UInt8(ttl & 0xFF), 0, 4, 0, 10, 0xC0, 12]
        }
        let start = ContinuousClock.now
        cache.keep(answer, to: query, now: start)
        let later = try #require(cache.answer(to: query, now: start + .seconds(5)))
        #expect(later.ttl == 55)
        #expect(ForwardedAnswerCache.recordTTLs(later.answer)?.map(\.ttl) == [55, 595])
        #expect(cache.answer(to: query, now: start + .seconds(60)) == nil, "gone at the smallest TTL")
        // DO set is another key; so is CD.
        cache.keep(answer, to: query, now: start)
        let withDO = Self.message(
            labels: ["mx", "test"], type: 15, additional: [0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 0])
        #expect(cache.answer(to: withDO, now: start) == nil)
        var checkingDisabled = query
        checkingDisabled[3] |= 0x10
        #expect(cache.answer(to: checkingDisabled, now: start) == nil)
        // An answer with an EDNS option (a cookie) is not kept; nor a SERVFAIL, nor one without records.
        let other = Self.message(labels: ["cookie", "test"], type: 15)
        var cookie = other
        cookie[2] |= 0x80
        cookie[7] = 1
        cookie[11] = 1
        cookie += [0xC0, 12, 0, 15, 0, 1, 0, 0, 1, 0, 0, 4, 0, 10, 0xC0, 12]
        cookie += [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]
        cache.keep(cookie, to: other, now: start)
        #expect(cache.answer(to: other, now: start) == nil)
        var failure = answer
        failure[3] = 2
        let failed = Self.message(labels: ["fail", "test"], type: 15)
        cache.keep(failure, to: failed, now: start)
        #expect(cache.answer(to: failed, now: start) == nil)
    }

    /// Counts the addresses it is asked to probe (the addresses are documentation ranges no test may connect to).
    final class ProbeLog: ConnectProber {
        let probed = Locked<[IPAddress]>([])
        func probe(_ ip: IPAddress, port: Int, timeout: Duration) async -> ProbeOutcome {
            probed.withLock { $0.append(ip) }
            return .failed(.connectionFailed)
        }
    }

    @Test("a served answer naming private addresses makes the server probe none of them")
    func noProbesIntoGuardedRanges() async throws {
        let dnsmasq = try await DNSMasq.start(
            records: TestZone.records + [
                "host-record=mixed.test,10.20.30.40,300", "host-record=mixed.test,192.0.2.77,300",
            ])
        defer { dnsmasq.stop() }
        let log = ProbeLog()
        let resolver = try Self.resolver(dnsmasq, prober: log)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let answer = await service.handle(ServiceRequest(method: "GET", target: "/resolve?name=mixed.test"))
        #expect(String(decoding: answer.body, as: UTF8.self).contains("192.0.2.77"))
        #expect(try await waitUntil { !log.probed.withLock { $0.isEmpty } })
        try await Task.sleep(for: .milliseconds(200))
        let probed = log.probed.withLock { $0 }
        #expect(probed.contains(IPAddress(ipv4: 192, 0, 2, 77)))
        #expect(!probed.contains { $0.isNonPublic }, "probed \(probed)")
        await resolver.shutdown()
    }

    @Test("the endpoints that carry no account answer 403 when turned off, whatever the accounts")
    func publicEndpoints() async throws {
        let overrides = HostOverrides()
        overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
        let signedOnly: [String: HTTPDNSSecret?] = ["acct": HTTPDNSSecret("s3cret")]
        let closed = HTTPDNSService(
            resolver: resolver,
            configuration: HTTPDNSService.Configuration(accounts: signedOnly, publicEndpoints: .off),
            logger: Self.logger)
        let query = Self.message(labels: ["fast", "test"], type: 1)
        for request in [
            ServiceRequest(method: "GET", target: "/resolve?name=fast.test"),
            ServiceRequest(method: "GET", target: "/d?dn=fast.test"), Self.post(query),
        ] {
            #expect(await closed.handle(request).status == 403, "\(request.target)")
        }
        let open = HTTPDNSService(
            resolver: resolver,
            configuration: HTTPDNSService.Configuration(accounts: signedOnly, publicEndpoints: .on),
            logger: Self.logger)
        #expect(await open.handle(ServiceRequest(method: "GET", target: "/resolve?name=fast.test")).status == 200)
        let unsignedAccounts = HTTPDNSService(
            resolver: resolver,
            configuration: HTTPDNSService.Configuration(accounts: ["acct": HTTPDNSSecret?.none]),
            logger: Self.logger)
        #expect(await unsignedAccounts.handle(Self.post(query)).status == 200, "open with unsigned accounts")
        await resolver.shutdown()
    }

    @Test("reverse-lookup names map to the range they point into")
    func reverseTargets() {
        #expect(ForwardedQuery.reverseTarget("4.3.2.1.in-addr.arpa") == IPAddress(ipv4: 1, 2, 3, 4))
        #expect(ForwardedQuery.reverseTarget("10.in-addr.arpa") == IPAddress(ipv4: 10, 0, 0, 0))
        #expect(ForwardedQuery.reverseTarget("x.in-addr.arpa") == nil)
        #expect(ForwardedQuery.reverseTarget("example.test") == nil)
        #expect(ForwardedQuery.reverseTarget("c.f.ip6.arpa")?.description == "fc00::")
        #expect(ForwardedQuery.reverseTarget("cc.f.ip6.arpa") == nil)
    }

    @Test(
        "the forwarding marker goes right after the records the header counts: trailing bytes are dropped, a message cut inside its question is not marked"
    )
    func markerPlacement() throws {
        let marker = ForwardingMarker()
        let query = Self.message(labels: ["multi", "test"], type: 15)
        #expect(DNSMessageWalk.sectionsEnd(query) == query.count)
        #expect(DNSMessageWalk.sectionsEnd(query + [1, 2, 3]) == query.count, "trailing bytes are not the message's")
        let marked = try #require(marker.marking(query + [1, 2, 3], questionEnd: query.count))
        // A new OPT record (11 bytes) holding the marker (4 + 9 bytes), where the trailing bytes were.
        #expect(marked.count == query.count + 11 + 13)
        #expect(marked[..<10] == query[..<10] && marked[11] == 1, "one additional record counted")
        #expect(ForwardingMarker.read(marked).map { Array($0.token) } == marker.token)
        #expect(DNSMessageWalk.sectionsEnd(Array(query.dropLast(2))) == nil, "the question is cut short")
        #expect(DNSMessageWalk.sectionsEnd(Array(query[..<11])) == nil, "shorter than a header")
    }
}

extension [UInt8] {
    /// Whether `bytes` appear anywhere in a row.
    fileprivate func windowsStartingWith(_ bytes: [UInt8]) -> Bool {
        count >= bytes.count
            && (0...(count - bytes.count)).contains { self[$0..<$0 + bytes.count].elementsEqual(bytes) }
    }

    /// Whether an EDNS option with code 8 (client subnet) and the test's length 7 appears anywhere.
    fileprivate var windowsStartingWithSubnet: Bool {
        count >= 4
            && (0...(count - 4)).contains {
                self[$0] == 0 && self[$0 + 1] == 8 && self[$0 + 2] == 0 && self[$0 + 3] == 7
            }
    }
}
