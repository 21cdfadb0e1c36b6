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

/// The encoded answers the server keeps per event loop (`AnswerMemo`): a kept answer is the full path's answer with
/// the asking client's ID, and nothing that changes an answer (a new cached answer, a score, an override, the
/// configuration, the TTL ticking down) is hidden by it. Against a real dnsmasq through c-ares.
@Suite("HTTP DNS service: kept answers")
struct AnswerMemoTests {
    static let logger = Logger(label: "answer-memo-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    struct Lab {
        let dnsmasq: DNSMasq
        let resolver: HostResolver
        let overrides: HostOverrides
        let service: HTTPDNSService

        static func start(configuration: HTTPDNSService.Configuration = .init()) async throws -> Lab {
            let dnsmasq = try await DNSMasq.start()
            let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(2)))
            let overrides = HostOverrides()
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], overrides: overrides,
                cache: HostCache(), prober: nil, onShutdown: [{ cares.shutdown() }])
            let service = HTTPDNSService(resolver: resolver, configuration: configuration, logger: logger)
            return Lab(dnsmasq: dnsmasq, resolver: resolver, overrides: overrides, service: service)
        }

        func stop() async {
            await resolver.shutdown()
            dnsmasq.stop()
        }
    }

    static func get(_ message: [UInt8]) -> ServiceRequest {
        ServiceRequest(
            method: "GET",
            target: "/dns-query?dns="
                + Data(message).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: ""))
    }

    static func query(_ name: String, type: UInt16 = 1, id: UInt16) -> [UInt8] {
        var message = ServedNamesTests.message(labels: name.split(separator: ".").map(String.init), type: type)
        message[0] = UInt8(id >> 8)
        message[1] = UInt8(id & 0xFF)
        return message
    }

    /// The answer's records for multi.test (the ID set aside).
    static func records(_ body: [UInt8], type: DNSRecordType = .a) throws -> [ResolvedAddress] {
        var body = body
        if body.count >= 2 { (body[0], body[1]) = (0, 0) }
        return try DNSWireMessage.addresses(in: body, for: try HostName("multi.test"), type: type, source: "test")
    }

    /// The answer's A records for multi.test, as text.
    static func addresses(_ body: [UInt8]) throws -> [String] { try records(body).map(\.ip.description) }

    /// What the exchange does on the event loop: plan with the memo, answer from the cache, keep what is steady.
    static func answer(_ request: ServiceRequest, _ service: HTTPDNSService, memo: AnswerMemo) -> (
        response: ServiceResponse, fromMemo: Bool
    )? {
        let now = ContinuousClock.now
        let plan = service.plan(request, memo: memo)
        var fromMemo = false
        if case .done = plan.work, plan.endpoint == "dns-query" { fromMemo = plan.name != nil }
        guard let (response, steadyFor) = service.immediateResponse(plan) else { return nil }
        if let steadyFor, let (message, generation, stamp) = plan.memoizable {
            memo.keep(
                response, to: message, name: plan.name, generation: generation, steadyFor: steadyFor, now: now,
                stamp: stamp, echoesSubnet: plan.echoesSubnet)
        }
        return (response, fromMemo)
    }

    @Test("a kept answer is the full path's answer with the asking client's ID, question as the client wrote it")
    func keptAnswerIsTheFullPathsAnswer() async throws {
        let lab = try await Lab.start()
        defer { Task { await lab.stop() } }
        // The first query fills the cache (an upstream lookup); the next is the first cache hit and is kept.
        _ = await lab.service.handle(Self.get(Self.query("multi.test", id: 1)))
        let memo = AnswerMemo()
        let first = try #require(Self.answer(Self.get(Self.query("multi.test", id: 0x1234)), lab.service, memo: memo))
        #expect(!first.fromMemo)
        #expect(memo.count == 1, "a steady cache hit is kept")
        let request = Self.get(Self.query("multi.test", id: 0xABCD))
        let kept = try #require(Self.answer(request, lab.service, memo: memo))
        #expect(kept.fromMemo)
        let full = try #require(lab.service.immediateResponse(lab.service.plan(request)))
        // The TTL may tick down between the two (then the kept one is no longer used): compare when it did not.
        if !kept.fromMemo || full.response.body == kept.response.body {
            #expect(kept.response == full.response, "the same bytes, status, type and max-age")
        }
        #expect(Array(kept.response.body.prefix(2)) == [0xAB, 0xCD], "the client's ID")
        #expect(try Set(Self.addresses(kept.response.body)) == Set(TestZone.multiV4))
        // Another ID, flag or case is another key; the question section stays the client's.
        let upper = try #require(Self.answer(Self.get(Self.query("MULTI.test", id: 7)), lab.service, memo: memo))
        #expect(!upper.fromMemo)
        #expect(upper.response.body[12 + 1] == UInt8(ascii: "M"), "the question as the client wrote it")
        // A query of another type is not answered from the A record's entry.
        _ = await lab.service.handle(Self.get(Self.query("multi.test", type: 28, id: 8)))
        let aaaa = try #require(
            Self.answer(Self.get(Self.query("multi.test", type: 28, id: 9)), lab.service, memo: memo))
        #expect(!aaaa.fromMemo)
        #expect(try Self.records(aaaa.response.body, type: .aaaa).count == TestZone.multiV6.count)
    }

    @Test(
        "a new cached answer, a score, an override and a configuration change each end the name's kept answers at once")
    func changesEndKeptAnswers() async throws {
        let lab = try await Lab.start()
        defer { Task { await lab.stop() } }
        _ = await lab.service.handle(Self.get(Self.query("multi.test", id: 1)))
        let memo = AnswerMemo()
        func ask() throws -> (addresses: [String], fromMemo: Bool) {
            let answer = try #require(Self.answer(Self.get(Self.query("multi.test", id: 2)), lab.service, memo: memo))
            return (try Self.addresses(answer.response.body), answer.fromMemo)
        }
        // A second kept answer, of another query of the same name (its lookup first): a change of the name ends
        // both.
        _ = await lab.service.handle(Self.get(Self.query("multi.test", type: 28, id: 5)))
        _ = try ask()
        #expect(try ask().fromMemo)
        _ = try #require(Self.answer(Self.get(Self.query("multi.test", type: 28, id: 6)), lab.service, memo: memo))
        #expect(memo.count == 2)
        let cache = try #require(lab.resolver.cache)
        let host = try HostName("multi.test")
        // A new answer in the cache.
        cache.store(
            host, family: .ipv4, addresses: [try #require(IPAddress("192.0.2.99"))], ttl: 300, origin: "cares",
            upstream: lab.resolver.upstreams.first?.identity)
        let afterStore = try ask()
        #expect(!afterStore.fromMemo)
        #expect(afterStore.addresses == ["192.0.2.99"])
        let otherQuery = try #require(
            Self.answer(Self.get(Self.query("multi.test", type: 28, id: 7)), lab.service, memo: memo))
        #expect(!otherQuery.fromMemo, "the name's other kept answer ended too")
        #expect(try ask().fromMemo)
        // A score: the ranking may change.
        cache.store(
            host, family: .ipv4, addresses: TestZone.multiV4.compactMap { IPAddress($0) }, ttl: 300, origin: "cares",
            upstream: lab.resolver.upstreams.first?.identity)
        _ = try ask()
        #expect(try ask().fromMemo)
        cache.recordFailure(to: try #require(IPAddress(TestZone.multiV4[0])), of: host)
        let afterFailure = try ask()
        #expect(!afterFailure.fromMemo)
        #expect(afterFailure.addresses.first == TestZone.multiV4[1], "the failed address goes last")
        // An override.
        _ = try ask()
        lab.overrides.set([try #require(IPAddress("127.0.0.88"))], for: try HostPattern("multi.test"))
        let overridden = try ask()
        #expect(!overridden.fromMemo)
        #expect(overridden.addresses == ["127.0.0.88"])
        lab.overrides.remove(try HostPattern("multi.test"))
        _ = try ask()
        #expect(try ask().fromMemo)
        // The service's configuration (here: at most one address per answer).
        lab.service.apply(.init(maximumAnswers: 1))
        let limited = try ask()
        #expect(!limited.fromMemo)
        #expect(limited.addresses.count == 1)
    }

    @Test("an entry lives only until the answer's TTL in whole seconds ticks down, never a second or more")
    func steadyOnlyUntilTheTTLTicks() async throws {
        let lab = try await Lab.start()
        defer { Task { await lab.stop() } }
        _ = await lab.service.handle(Self.get(Self.query("multi.test", id: 1)))
        let message = Self.query("multi.test", id: 3)
        let plan = lab.service.plan(Self.get(message), memo: AnswerMemo())
        let (response, steadyFor) = try #require(lab.service.immediateResponse(plan))
        let steady = try #require(steadyFor, "a fresh cache hit is steady for a while")
        #expect(steady > .zero && steady <= .seconds(1))
        let memo = AnswerMemo()
        let (_, generation, _) = try #require(plan.memoizable)
        let made = ContinuousClock.now
        memo.keep(response, to: message, name: "multi.test", generation: generation, steadyFor: steady, now: made)
        #expect(memo.answer(to: message, generation: generation, now: made) != nil)
        #expect(memo.answer(to: message, generation: generation, now: made + steady) == nil, "past its time")
        memo.keep(response, to: message, name: "multi.test", generation: generation, steadyFor: steady, now: made)
        #expect(memo.answer(to: message, generation: generation &+ 1, now: made) == nil, "another generation")
        // Once it has ticked, the full path gives the lower TTL.
        try await Task.sleep(for: steady + .milliseconds(10))
        let later = try #require(lab.service.immediateResponse(lab.service.plan(Self.get(message))))
        let ttl = { (body: [UInt8]) in try Self.records(body).map(\.ttl).min() ?? 0 }
        #expect(try ttl(later.response.body) < ttl(response.body))
    }

    @Test("a query longer than 512 bytes (padding, options) is answered but not kept: a table stays a few MiB")
    func longQueriesAreNotKept() async throws {
        let lab = try await Lab.start()
        defer { Task { await lab.stop() } }
        var message = Self.query("multi.test", id: 5)
        // One EDNS OPT record with 600 bytes of padding (option 12, RFC 7830).
        message[11] = 1
        message += [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0x02, 0x5C, 0, 12, 0x02, 0x58] + [UInt8](repeating: 0, count: 600)
        _ = await lab.service.handle(Self.get(message))
        let memo = AnswerMemo()
        let answer = try #require(Self.answer(Self.get(message), lab.service, memo: memo))
        #expect(answer.response.status == 200)
        #expect(try Set(Self.addresses(answer.response.body)) == Set(TestZone.multiV4))
        #expect(memo.count == 0)
    }

    @Test("kept answers still pass the rate limit, and a POST of another content type is still 415")
    func limitsStillApply() async throws {
        let lab = try await Lab.start(configuration: .init(rateLimitPerSecond: 0.001, rateLimitBurst: 3))
        defer { Task { await lab.stop() } }
        let client = try #require(IPAddress("192.0.2.200"))
        let message = Self.query("multi.test", id: 4)
        func post(_ type: String) -> ServiceRequest {
            ServiceRequest(method: "POST", target: "/dns-query", contentType: type, body: message, client: client)
        }
        _ = await lab.service.handle(post("application/dns-message"))
        let memo = AnswerMemo()
        let kept = try #require(Self.answer(post("application/dns-message"), lab.service, memo: memo))
        #expect(kept.response.status == 200 && memo.count == 1)
        let wrongType = try #require(Self.answer(post("text/plain"), lab.service, memo: memo))
        #expect(wrongType.response.status == 415)
        let limited = try #require(Self.answer(post("application/dns-message"), lab.service, memo: memo))
        #expect(limited.response.status == 429, "the fourth request of a burst of three")
    }

    @Test("over the wire: each client gets its own ID back, and a new cached answer is served at once")
    func overTheWire() async throws {
        let lab = try await Lab.start()
        let server = try await HTTPDNSServer.start(
            service: lab.service, configuration: .init(host: "127.0.0.1", port: 0), logger: Self.logger)
        do {
            func ask(id: UInt16) async throws -> [UInt8] {
                let target = Self.get(Self.query("multi.test", id: id)).target
                let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
                let reply = try await Self.exchange(port: server.port, request)
                let end = try #require(reply.firstRange(of: Array("\r\n\r\n".utf8)))
                #expect(String(decoding: reply[..<end.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
                return Array(reply[end.upperBound...])
            }
            for id in [UInt16(1), 2, 0xBEEF, 0xBEEF, 7, 7] {
                let body = try await ask(id: id)
                #expect(Array(body.prefix(2)) == [UInt8(id >> 8), UInt8(id & 0xFF)])
                #expect(try Set(Self.addresses(body)) == Set(TestZone.multiV4))
            }
            lab.resolver.cache?.store(
                try HostName("multi.test"), family: .ipv4, addresses: [try #require(IPAddress("192.0.2.98"))],
                ttl: 300, origin: "cares", upstream: lab.resolver.upstreams.first?.identity)
            #expect(try await Self.addresses(ask(id: 7)) == ["192.0.2.98"])
        } catch {
            Issue.record(error)
        }
        await server.shutdown(grace: .milliseconds(100))
        await lab.stop()
    }

    /// Sends `request` on a new connection and reads every byte until the server closes it.
    static func exchange(port: Int, _ request: [UInt8]) async throws -> [UInt8] {
        try await offThePool {
            let fd = try LoopbackTCP.connect(port: port, receiveTimeout: TestTiming.scaled(.seconds(15)))
            defer { close(fd) }
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var reply: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { return reply }
                reply += buffer[0..<count]
            }
        }
    }

    @Test(
        "a store of one name ends that name's kept answers only: another name's stays kept (before, every store ended every table)"
    )
    func storesEndOnlyTheirName() async throws {
        let lab = try await Lab.start()
        defer { Task { await lab.stop() } }
        let cache = try #require(lab.resolver.cache)
        // Two names in the cache, each kept after its first hit.
        cache.store(
            try HostName("one.test"), family: .ipv4, addresses: [IPAddress(ipv4: 192, 0, 2, 1)], ttl: 300,
            origin: "test")
        cache.store(
            try HostName("two.test"), family: .ipv4, addresses: [IPAddress(ipv4: 192, 0, 2, 2)], ttl: 300,
            origin: "test")
        let memo = AnswerMemo()
        for name in ["one.test", "two.test"] {
            let first = try #require(Self.answer(Self.get(Self.query(name, id: 1)), lab.service, memo: memo))
            #expect(!first.fromMemo)
            let kept = try #require(Self.answer(Self.get(Self.query(name, id: 2)), lab.service, memo: memo))
            #expect(kept.fromMemo, "\(name) kept")
        }
        // A new answer for one.test: its kept answer ends, two.test's stays.
        cache.store(
            try HostName("one.test"), family: .ipv4, addresses: [IPAddress(ipv4: 192, 0, 2, 9)], ttl: 300,
            origin: "test")
        let one = try #require(Self.answer(Self.get(Self.query("one.test", id: 3)), lab.service, memo: memo))
        #expect(!one.fromMemo, "one.test's answer changed")
        #expect(one.response.body.suffix(4) == [192, 0, 2, 9], "the new address, not the kept one")
        let two = try #require(Self.answer(Self.get(Self.query("two.test", id: 4)), lab.service, memo: memo))
        #expect(two.fromMemo || two.response.body.suffix(4) == [192, 0, 2, 2], "two.test's kept answer stays")
        // A connect failure recorded for two.test (its ranking may change) ends its kept answer too.
        cache.recordFailure(to: IPAddress(ipv4: 192, 0, 2, 2), of: try HostName("two.test"))
        let after = try #require(Self.answer(Self.get(Self.query("two.test", id: 5)), lab.service, memo: memo))
        #expect(!after.fromMemo)
    }

    @Test("a full table makes room by its oldest entry, one at a time: the newest entries stay")
    func fullTableDropsTheOldest() {
        let memo = AnswerMemo(capacity: 4)
        let now = ContinuousClock.now
        let response = ServiceResponse(status: 200, contentType: "application/dns-message", body: [0, 0, 1, 2, 3])
        for id in 0..<6 {
            memo.keep(
                response, to: Self.query("n\(id).test", id: 0), name: "n\(id).test", generation: 0,
                steadyFor: .seconds(1), now: now)
        }
        #expect(memo.count == 4)
        #expect(memo.answer(to: Self.query("n0.test", id: 7), generation: 0, now: now) == nil, "the oldest went")
        #expect(memo.answer(to: Self.query("n1.test", id: 7), generation: 0, now: now) == nil)
        for id in 2..<6 {
            #expect(memo.answer(to: Self.query("n\(id).test", id: 7), generation: 0, now: now) != nil)
        }
    }

    /// A GET of multi.test with an OPT record carrying `subnet` (RFC 7871), with the ID `id`, from an address in
    /// that network (a network stated by a client outside it is that client's alone, never kept for others).
    static func get(stating subnet: String, id: UInt16) throws -> ServiceRequest {
        let network = try #require(IPNetwork(subnet))
        var request = get(EDNSClientSubnet.addingOPT(to: query("multi.test", id: id), subnet: network))
        var host = network.address.bytes
        host[host.count - 1] |= 9
        request.client = IPAddress(bytes: host)
        return request
    }

    @Test(
        "ECS queries of a name shared by every network keep one entry, whatever network they state; each answer echoes its own"
    )
    func subnetQueriesShareAnEntry() async throws {
        let lab = try await Lab.start()
        defer { Task { await lab.stop() } }
        // The first query asks upstream (dnsmasq cannot answer by network, so the name is everyone's).
        _ = await lab.service.handle(try Self.get(stating: "84.17.5.0/24", id: 1))
        let memo = AnswerMemo()
        let first = try #require(
            Self.answer(try Self.get(stating: "84.17.5.0/24", id: 2), lab.service, memo: memo))
        #expect(!first.fromMemo)
        #expect(memo.count == 1)
        for (index, subnet) in ["62.4.9.0/24", "100.64.7.0/24", "84.17.5.0/24", "192.0.2.0/24"].enumerated() {
            let request = try Self.get(stating: subnet, id: UInt16(10 + index))
            let kept = try #require(Self.answer(request, lab.service, memo: memo))
            #expect(kept.fromMemo, "\(subnet): answered from the one entry")
            #expect(memo.count == 1)
            let echoed = try #require(try EDNSClientSubnet.find(in: kept.response.body))
            #expect(echoed.subnet == IPNetwork(subnet), "\(subnet): the client's own network echoed")
            #expect(echoed.scope == 0)
            let full = try #require(lab.service.immediateResponse(lab.service.plan(request)))
            if full.response.body == kept.response.body || !kept.fromMemo {
                #expect(kept.response == full.response, "\(subnet): the full path's bytes")
            }
        }
        // Another source prefix length is another key (the echo would not fit the kept answer's).
        let wider = try #require(
            Self.answer(try Self.get(stating: "84.17.0.0/16", id: 20), lab.service, memo: memo))
        #expect(!wider.fromMemo)
        #expect(try EDNSClientSubnet.find(in: wider.response.body)?.subnet == IPNetwork("84.17.0.0/16"))
    }

    @Test("with the client subnet off, ECS queries share an entry and nothing is echoed")
    func subnetQueriesWithTheModeOff() async throws {
        let lab = try await Lab.start(configuration: .init(clientSubnetMode: .off))
        defer { Task { await lab.stop() } }
        _ = await lab.service.handle(try Self.get(stating: "198.51.100.0/24", id: 1))
        let memo = AnswerMemo()
        _ = try #require(Self.answer(try Self.get(stating: "192.0.2.0/24", id: 2), lab.service, memo: memo))
        let kept = try #require(
            Self.answer(try Self.get(stating: "203.0.113.0/24", id: 3), lab.service, memo: memo))
        #expect(kept.fromMemo)
        #expect(memo.count == 1)
        #expect(try EDNSClientSubnet.find(in: kept.response.body) == nil, "no option echoed")
        #expect(try Set(Self.addresses(kept.response.body)) == Set(TestZone.multiV4))
    }
}
