import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// Misses answered from the event loop that received them (the query out on that loop's own sockets, no task) and
/// from a task: the same answers, one upstream query shared between the two, and a loop's wait that is given up
/// gives its place back.
@Suite("HTTP DNS service: misses from the receiving event loop")
struct LoopPathTests {
    static let logger = Logger(label: "loop-path-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A service asking `server` on own sockets; its misses go out from `group`'s loops when `fromLoops`, else from
    /// a task.
    static func service(
        asking server: ServerAddress, group: any EventLoopGroup, fromLoops: Bool,
        configuration: HTTPDNSService.Configuration = .init(), timeout: Duration = .seconds(5)
    ) throws -> (HTTPDNSService, HostResolver) {
        let plain = try PlainDNSResolver(
            configuration: .init(servers: [server], timeout: timeout, tries: 2),
            eventLoopGroup: PlainDNSClient.upstreamEventLoopGroup, servingGroup: fromLoops ? group : nil,
            logger: logger)
        // Other types relayed through the same kind of sockets.
        var cares = CAresResolver.Configuration(servers: [server], timeout: timeout, tries: 2)
        cares.usesOwnSockets = true
        let forwarder = try ReloadingCAresForwarder(
            configuration: cares, logger: logger, servingGroup: fromLoops ? group : nil)
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: plain)], overrides: HostOverrides(),
            cache: HostCache(), prober: nil, onShutdown: [{ plain.shutdown() }, { forwarder.shutdown() }])
        var configuration = configuration
        configuration.otherTypes = .forward
        return (
            HTTPDNSService(resolver: resolver, configuration: configuration, logger: logger, forwarder: forwarder),
            resolver
        )
    }

    /// Asks `service` as a TCP front on `loop` does, from `client`; the wait, if the answer is not at once, goes to
    /// `waiting`.
    static func ask(
        _ service: HTTPDNSService, _ message: [UInt8], client: IPAddress?, on loop: any EventLoop,
        waiting: @escaping @Sendable (UpstreamWait) -> Void = { _ in }
    ) async -> ServiceResponse {
        await withCheckedContinuation { continuation in
            loop.execute {
                let exchange = Exchange(
                    service: service, limits: .init(maximumBodyBytes: 65_536), logger: logger, client: client,
                    transport: .tcp)
                let request = ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message", body: message,
                    client: client)
                let response = exchange.answer(
                    request, on: loop,
                    later: {
                        NIOLoopBound({ continuation.resume(returning: $0) }, eventLoop: loop)
                    }, waiting: waiting)
                if let response { continuation.resume(returning: response) }
            }
        }
    }

    /// A query for `name` of `type` (1 A, 28 AAAA, or another, relayed), with an ECS option for `subnet` when
    /// given.
    static func query(_ name: String, type: UInt16, subnet: String? = nil) throws -> [UInt8] {
        let host = try HostName(name)
        var query = DNSWireMessage.query(for: host, type: type == 28 ? .aaaa : .a)
        (query[query.count - 4], query[query.count - 3]) = (UInt8(type >> 8), UInt8(type & 0xFF))
        guard let subnet else { return EDNSClientSubnet.settingOption(in: query, IPNetwork("0.0.0.0/0")!)! }
        return EDNSClientSubnet.addingOPT(to: query, subnet: try #require(IPNetwork(subnet)))
    }

    /// What an answer says: its code, its addresses in order and the scope of its ECS option.
    static func summary(_ response: ServiceResponse, name: String, type: UInt16) -> String {
        var body = response.body
        guard body.count >= 12 else { return "status \(response.status)" }
        let code = body[3] & 0x0F
        (body[0], body[1]) = (0, 0)
        // A relayed type: the whole answer, its records' TTLs set aside.
        guard type == 1 || type == 28 else {
            // Every record's TTL but OPT's (a second may pass between the two asks).
            var ttls: [Int] = []
            DNSMessageWalk.forEachRecord(body) { start in
                if !(body[start] == 0 && body[start + 1] == 41) { ttls.append(start + 4) }
                return true
            }
            for offset in ttls { body.replaceSubrange(offset..<offset + 4, with: [0, 0, 0, 0]) }
            return "rcode \(code) \(body)"
        }
        let addresses =
            (try? DNSWireMessage.addresses(
                in: body, for: try HostName(name), type: type == 28 ? .aaaa : .a, source: "test"))?
            .map(\.ip.description) ?? []
        let scope = (try? EDNSClientSubnet.find(in: body))??.scope
        return "rcode \(code) \(addresses) scope \(scope.map(String.init) ?? "-")"
    }

    /// Asks `fromLoop` and `fromTask` the same queries (every client, name, type, and no, a foreign and the client's
    /// own stated network), twice each (the miss, then what the cache or the kept answers say), expects the same
    /// answers, and returns how many pairs it compared.
    static func compare(
        _ fromLoop: HTTPDNSService, _ fromTask: HTTPDNSService, clients: [IPAddress], names: [String], types: [UInt16],
        on loop: any EventLoop, mode: String
    ) async throws -> Int {
        var compared = 0
        for client in clients {
            for name in names {
                for type in types {
                    for subnet in [nil, "84.17.5.0/24", "198.51.100.0/24"] {
                        let message = try Self.query(name, type: type, subnet: subnet)
                        for round in 0..<2 {
                            let viaLoop = await Self.ask(fromLoop, message, client: client, on: loop)
                            let viaTask = await Self.ask(fromTask, message, client: client, on: loop)
                            #expect(
                                Self.summary(viaLoop, name: name, type: type)
                                    == Self.summary(viaTask, name: name, type: type),
                                "\(mode) \(client) \(name) \(type) \(subnet ?? "-") round \(round)")
                            compared += 1
                        }
                    }
                }
            }
        }
        return compared
    }

    @Test(
        "differential: from the loop and from a task, the same answers from PowerDNS (LUA views by the client's network and by a stated one, CNAME chains, NXDOMAIN, NODATA, SERVFAIL, relayed TXT and HTTPS), with the client subnet on and off, first asked and cached"
    )
    func sameAnswersBothPaths() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        // The shared group, whose loops the forwarder's own sockets use by default.
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let clients = ["198.51.100.7", "203.0.113.9", "127.0.1.5", "127.0.2.5", "2001:db8:1::5"].map {
            IPAddress($0)!
        }
        let names = ["www", "flat", "alias", "part", "nope", "empty", "broken", "p0", "web", "pub", "big"].map {
            "\($0).ecs.test"
        }
        var compared = 0
        for mode in [HTTPDNSService.Configuration.ClientSubnetMode.on, .off] {
            let configuration = HTTPDNSService.Configuration(clientSubnetMode: mode)
            let (fromLoop, loopResolver) = try Self.service(
                asking: pdns.address, group: group, fromLoops: true, configuration: configuration)
            let (fromTask, taskResolver) = try Self.service(
                asking: pdns.address, group: group, fromLoops: false, configuration: configuration)
            #expect(loopResolver.resolvesOnLoop(loop, family: .ipv4))
            #expect(!taskResolver.resolvesOnLoop(loop, family: .ipv4))
            compared += try await Self.compare(
                fromLoop, fromTask, clients: clients, names: names, types: [1, 28, 16, 65], on: loop, mode: "\(mode)")
            await loopResolver.shutdown()
            await taskResolver.shutdown()
        }
        #expect(compared == 2 * 5 * 11 * 4 * 3 * 2)
    }

    /// An HTTP DNS provider seen only as a `HostNameResolver`: the pipeline asks it from a task.
    struct TaskOnly: HostNameResolver {
        let provider: HTTPDNSResolver

        func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
            try await provider.resolve(host, family: family)
        }
    }

    @Test(
        "differential, an HTTP DNS upstream (RFC 8484 through dnsdist to PowerDNS, a 60 s budget): asked from the loop with no task and from a task, the same answers for every client network, with the client subnet on and off, first asked and cached"
    )
    func sameAnswersOverHTTPDNS() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let dnsdist = try await DNSDist.start(
            backend: pdns.address, certificate: try certificates.leaf(for: "doh.test"))
        defer { dnsdist.stop() }
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        /// A service whose one upstream is dnsdist's DoH listener, asked from a task when `fromTask`.
        func service(fromTask: Bool, mode: HTTPDNSService.Configuration.ClientSubnetMode) throws
            -> (HTTPDNSService, HostResolver)
        {
            let doh = try HTTPDNSResolver(
                configuration: .init(
                    api: .dnsMessage(method: .get),
                    endpoints: [
                        try HTTPDNSEndpoint(
                            try #require(dnsdist.httpsURL), bootstrapAddresses: [IPAddress("127.0.0.1")!])
                    ],
                    allowNonPublicAddresses: true, budget: .seconds(60)),
                transportConfiguration: .init(additionalTrustRoots: [certificates.caPath]), logger: Self.logger)
            let upstream: any HostNameResolver = fromTask ? TaskOnly(provider: doh) : doh
            let resolver = HostResolver(
                upstreams: [.init(name: "doh", kind: .httpDNS, resolver: upstream)], overrides: HostOverrides(),
                cache: HostCache(), prober: nil, onShutdown: [{ await doh.shutdown() }])
            return (
                HTTPDNSService(
                    resolver: resolver, configuration: .init(clientSubnetMode: mode), logger: Self.logger),
                resolver
            )
        }
        let clients = ["198.51.100.7", "203.0.113.9", "127.0.1.5", "2001:db8:1::5"].map { IPAddress($0)! }
        let names = ["www", "flat", "alias", "part", "nope", "empty", "broken", "p0"].map { "\($0).ecs.test" }
        var compared = 0
        for mode in [HTTPDNSService.Configuration.ClientSubnetMode.on, .off] {
            let (fromLoop, loopResolver) = try service(fromTask: false, mode: mode)
            let (fromTask, taskResolver) = try service(fromTask: true, mode: mode)
            #expect(loopResolver.resolvesOnLoop(loop, family: .ipv4))
            #expect(!taskResolver.resolvesOnLoop(loop, family: .ipv4))
            compared += try await Self.compare(
                fromLoop, fromTask, clients: clients, names: names, types: [1, 28], on: loop, mode: "\(mode)")
            await loopResolver.shutdown()
            await taskResolver.shutdown()
        }
        #expect(compared == 2 * 4 * 8 * 2 * 3 * 2)
    }

    @Test(
        "from the loop, an HTTP DNS provider's budget holds as in a task: a stream the server never answers ends in SERVFAIL at the budget, not at the request timeout",
        .timeLimit(.minutes(1))
    )
    func httpDNSBudgetOnTheLoop() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        var behaviour = LocalHTTP2DoHServer.Behaviour()
        behaviour.stalled = ["stall.test"]
        let server = try await LocalHTTP2DoHServer(
            certificate: try certificates.leaf(for: "doh.test"), behaviour: behaviour)
        // A request timeout past the test's time limit: only the budget can end the lookup in time. The connection
        // is made first by a provider without a budget on the same transport (a handshake under a sanitizer can take
        // longer than the budget).
        let transport = try HTTPDNSTransport(
            configuration: .init(
                requestTimeout: .seconds(600), connectTimeout: .seconds(30),
                additionalTrustRoots: [certificates.caPath]))
        func provider(budget: Duration?) throws -> HTTPDNSResolver {
            try HTTPDNSResolver(
                configuration: .init(
                    api: .dnsMessage(method: .get),
                    endpoints: [
                        try HTTPDNSEndpoint(
                            "https://doh.test:\(server.port)/dns-query", bootstrapAddresses: [IPAddress("127.0.0.1")!])
                    ],
                    allowNonPublicAddresses: true, budget: budget),
                transport: transport, logger: Self.logger)
        }
        let doh = try provider(budget: .milliseconds(300))
        _ = try await provider(budget: nil).resolve(try HostName("warm.test"), family: .ipv4)
        let resolver = HostResolver(
            upstreams: [.init(name: "doh", kind: .httpDNS, resolver: doh)], overrides: HostOverrides(),
            cache: HostCache(), prober: nil)
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(clientSubnetMode: .off), logger: Self.logger)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        #expect(resolver.resolvesOnLoop(loop, family: .ipv4))
        #expect(doh.prepareDoH(try HostName("x.test"), type: .a, subnet: nil) != nil, "a ready connection")
        let stalled = await Self.ask(service, try Self.query("stall.test", type: 1), client: nil, on: loop)
        #expect(Self.summary(stalled, name: "stall.test", type: 1) == "rcode 2 [] scope -")
        #expect(try await waitUntil { server.streams == 2 }, "the stalled stream went out on the ready connection")
        await resolver.shutdown()
        await transport.shutdown()
        await server.stop()
    }

    @Test(
        "a task and a loop asking for the same new name at once share one upstream query; a loop's wait given up leaves its flight and gives its place back at once"
    )
    func sharedFlightAndCancellation() async throws {
        // An upstream that answers each question 300 ms later, and counts them.
        let upstream = try BoundUDPSocket()
        defer { upstream.close() }
        let stop = UpstreamSocketTests.Stop()
        async let asked = offThePool { Self.slowUpstream(upstream, until: stop.flag) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let (service, resolver) = try Self.service(
            asking: upstream.address, group: group, fromLoops: true,
            configuration: .init(clientSubnetMode: .off), timeout: .seconds(2))
        let client = IPAddress("127.0.0.1")
        let shared = try Self.query("shared.example.test", type: 1)
        async let viaLoop = Self.ask(service, shared, client: client, on: loop)
        try await Task.sleep(for: .milliseconds(50))
        let viaTask = await service.handle(
            ServiceRequest(method: "GET", target: "/resolve?name=shared.example.test&type=A", client: client))
        let loopAnswer = await viaLoop
        #expect(Self.summary(loopAnswer, name: "shared.example.test", type: 1) == "rcode 0 [\"192.0.2.1\"] scope -")
        #expect(String(decoding: viaTask.body, as: UTF8.self).contains("192.0.2.1"))
        // A wait given up: nothing answers it, and its place is back at once (own sockets stop the query).
        let waits = Locked<[UpstreamWait]>([])
        let answered = Atomic<Bool>(false)
        let dropped = try Self.query("dropped.example.test", type: 1)
        try await loop.submit {
            let exchange = Exchange(
                service: service, limits: .init(maximumBodyBytes: 65_536), logger: Self.logger, client: client,
                transport: .tcp)
            let request = ServiceRequest(
                method: "POST", target: "/dns-query", contentType: "application/dns-message", body: dropped,
                client: client)
            let response = exchange.answer(
                request, on: loop,
                later: { NIOLoopBound({ _ in answered.store(true, ordering: .relaxed) }, eventLoop: loop) },
                waiting: { wait in waits.withLock { $0.append(wait) } })
            #expect(response == nil, "the new name waits for the upstream")
        }.get()
        try await Task.sleep(for: .milliseconds(100))
        #expect(service.upstreamBudget.inFlight == 1)
        for wait in waits.withLock({ $0 }) { wait.cancel() }
        try await Task.sleep(for: .milliseconds(50))
        #expect(service.upstreamBudget.inFlight == 0, "the place is back")
        #expect(resolver.waitingCallers == 0, "nobody waits on the flight")
        let wasAnswered = answered.load(ordering: .relaxed)
        #expect(!wasAnswered, "a wait given up is never answered")
        stop.flag.store(true, ordering: .releasing)
        let questions = try await asked
        #expect(questions.filter { $0 == "shared.example.test" }.count == 1, "one upstream query: \(questions)")
        await resolver.shutdown()
        try await group.shutdownGracefully()
    }

    @Test(
        "from the loop, a name the upstream denies is asked of the fallback (sources.systemFallback), as from a task; one it knows is not"
    )
    func fallbackAfterADenial() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        // The fallback: another server (dnsmasq) that knows the name PowerDNS denies.
        let other = try await DNSMasq.start(records: ["host-record=nope.ecs.test,192.0.2.77,300"])
        defer { other.stop() }
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let plain = try PlainDNSResolver(
            configuration: .init(servers: [pdns.address], timeout: .seconds(5), tries: 2),
            eventLoopGroup: PlainDNSClient.upstreamEventLoopGroup, servingGroup: group, logger: Self.logger)
        let fallback = try CAresResolver(configuration: .init(servers: [other.address], timeout: .seconds(2)))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: plain)],
            fallback: .init(name: "system", kind: .other, resolver: fallback), cache: HostCache(), prober: nil,
            onShutdown: [{ plain.shutdown() }, { fallback.shutdown() }])
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(clientSubnetMode: .off), logger: Self.logger)
        #expect(resolver.resolvesOnLoop(loop, family: .ipv4))
        let denied = await Self.ask(service, try Self.query("nope.ecs.test", type: 1), client: nil, on: loop)
        #expect(Self.summary(denied, name: "nope.ecs.test", type: 1) == "rcode 0 [\"192.0.2.77\"] scope -")
        let known = await Self.ask(service, try Self.query("flat.ecs.test", type: 1), client: nil, on: loop)
        #expect(Self.summary(known, name: "flat.ecs.test", type: 1) == "rcode 0 [\"192.0.2.50\"] scope -")
        await resolver.shutdown()
    }

    @Test(
        "an answer the loop has at once (a cached NXDOMAIN, which the cache-hit path does not answer) comes in a later turn, after the front has registered its wait"
    )
    func immediateAnswerAfterTheWait() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let (service, resolver) = try Self.service(
            asking: pdns.address, group: group, fromLoops: true, configuration: .init(clientSubnetMode: .off))
        let message = try Self.query("nope.ecs.test", type: 1)
        let first = await Self.ask(service, message, client: nil, on: loop)
        #expect(Self.summary(first, name: "nope.ecs.test", type: 1).hasPrefix("rcode 3"))
        // Asked again: the negative answer is in the cache; what the front sees, in order.
        let events = Locked<[String]>([])
        let second = await withCheckedContinuation { (continuation: CheckedContinuation<ServiceResponse, Never>) in
            loop.execute {
                let exchange = Exchange(
                    service: service, limits: .init(maximumBodyBytes: 65_536), logger: Self.logger, client: nil,
                    transport: .tcp)
                let request = ServiceRequest(
                    method: "POST", target: "/dns-query", contentType: "application/dns-message", body: message)
                let response = exchange.answer(
                    request, on: loop,
                    later: {
                        NIOLoopBound(
                            { response in
                                events.withLock { $0.append("answer") }
                                continuation.resume(returning: response)
                            }, eventLoop: loop)
                    },
                    waiting: { _ in events.withLock { $0.append("wait") } })
                if let response {
                    events.withLock { $0.append("at once") }
                    continuation.resume(returning: response)
                }
            }
        }
        #expect(Self.summary(second, name: "nope.ecs.test", type: 1).hasPrefix("rcode 3"))
        #expect(events.withLock { $0 } == ["wait", "answer"])
        #expect(service.upstreamBudget.inFlight == 0)
        await resolver.shutdown()
    }

    /// Answers every A question `socket` receives with 192.0.2.1, 300 ms later, until `stop`; returns the names
    /// asked (lower case).
    static func slowUpstream(_ socket: BoundUDPSocket, until stop: borrowing Atomic<Bool>) -> [String] {
        var names: [String] = []
        while !stop.load(ordering: .acquiring) {
            guard let (query, port) = socket.receive(within: .milliseconds(50)), query.count > 12 else { continue }
            var offset = 12
            var labels: [String] = []
            while offset < query.count, query[offset] != 0 {
                let length = Int(query[offset])
                labels.append(
                    String(decoding: query[offset + 1..<min(offset + 1 + length, query.count)], as: UTF8.self))
                offset += length + 1
            }
            names.append(labels.joined(separator: ".").lowercased())
            let id = UInt16(query[0]) << 8 | UInt16(query[1])
            let answer = UpstreamSocketTests.answer(
                id: id, question: query[12..<offset + 5], address: [192, 0, 2, 1], ttl: 300)
            // The dropped name is never answered.
            guard !labels.first!.lowercased().hasPrefix("dropped") else { continue }
            usleep(300_000)
            _ = socket.send(answer, to: port)
        }
        return names
    }
}
