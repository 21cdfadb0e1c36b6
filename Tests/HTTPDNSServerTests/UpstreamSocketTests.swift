import Foundation
import Glibc
import Logging
import NIOPosix
import Prometheus
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// serve's classic upstream queries on its own sockets (`PlainDNSClient`): answers nobody off the path can choose,
/// against a forger that knows the upstream's address and every port the queries leave from, and the same answers
/// as c-ares's path from a real authoritative server (PowerDNS), truncation, negatives and chains included.
@Suite("serve's upstream sockets: unspoofable, and answering as c-ares does")
struct UpstreamSocketTests {
    static let logger = Logger(label: "upstream-socket-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// An A answer to `query` (ID `id`, the question `question` as given) with one address and a TTL.
    static func answer(id: UInt16, question: ArraySlice<UInt8>, address: [UInt8], ttl: UInt32) -> [UInt8] {
        [UInt8(id >> 8), UInt8(id & 0xFF), 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + Array(question)
            + [
                0xC0, 0x0C, 0, 1, 0, 1, UInt8(ttl >> 24), UInt8(ttl >> 16 & 0xFF), UInt8(ttl >> 8 & 0xFF),
                UInt8(ttl & 0xFF),
            ]
            + [0, 4] + address
    }

    /// The question of `query` with the case of every letter turned over: what a forger who guessed the port and
    /// the ID but not the case (DNS 0x20) sends back.
    static func flipped(_ question: ArraySlice<UInt8>) -> [UInt8] {
        question.map { byte in (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A ? byte ^ 0x20 : byte }
    }

    /// The upstream and its forger in one: for each query it receives until `stop` is set (tries asked again
    /// included), it records the source port, then sends from the upstream's own address and port (as a forger
    /// spoofing it would) 65,536 answers, one for every ID, naming 6.6.6.6 with a TTL of a day, then, after a pause
    /// that lets the client's socket drain, the forged answer with the query's own ID and the wrong case once more
    /// and the real answer (192.0.2.1), twice (a second copy is dropped as answered already).
    static func forgingUpstream(_ socket: BoundUDPSocket, until stop: borrowing Atomic<Bool>) -> [UInt16] {
        var ports: [UInt16] = []
        while !stop.load(ordering: .acquiring) {
            guard let (query, port) = socket.receive(within: .milliseconds(200)), query.count > 12,
                let (_, questionEnd) = BoundUDPSocket.question(in: query[...])
            else { continue }
            ports.append(port)
            let id = UInt16(query[0]) << 8 | UInt16(query[1])
            let forgedQuestion = Self.flipped(query[12..<questionEnd])
            for guess in 0...UInt16.max {
                socket.send(
                    Self.answer(id: guess, question: forgedQuestion[...], address: [6, 6, 6, 6], ttl: 86_400), to: port)
            }
            usleep(300_000)
            socket.send(
                Self.answer(id: id, question: forgedQuestion[...], address: [6, 6, 6, 6], ttl: 86_400), to: port)
            let real = Self.answer(id: id, question: query[12..<questionEnd], address: [192, 0, 2, 1], ttl: 300)
            socket.send(real, to: port)
            usleep(50_000)
            socket.send(real, to: port)
        }
        return ports
    }

    @Test(
        "a forger who knows the upstream's address and each query's port and sends 65,536 answers a query (every ID, and the right ID with the wrong case) gets nothing served or cached; its answers are counted and dropped"
    )
    func forgedAnswersNeverTaken() async throws {
        let upstream = try BoundUDPSocket()
        defer { upstream.close() }
        let registry = PrometheusCollectorRegistry()
        // The forger sends 65,536 answers before the real one, from a thread of its own: on a loaded machine that
        // takes seconds, so the wait is long (the test asserts what is served, never how fast).
        var cares = CAresResolver.Configuration(
            servers: [upstream.address], timeout: TestTiming.scaled(.seconds(20)), tries: 2)
        cares.usesOwnSockets = true
        let plain = try #require(
            try HostResolver.ownSockets(
                cares, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger,
                metricsFactory: PrometheusMetricsFactory(registry: registry)))
        defer { plain.shutdown() }
        let cache = HostCache(configuration: .init())
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: plain)], overrides: HostOverrides(), cache: cache,
            prober: nil)
        let names = (0..<4).map { "poisoning-target-\($0).example.test" }
        let stop = Stop()
        async let forger = offThePool { Self.forgingUpstream(upstream, until: stop.flag) }
        for name in names {
            let answer = try? await resolver.resolve(try HostName(name), family: .ipv4)
            #expect(answer?.addresses.map(\.ip) == [IPAddress(ipv4: 192, 0, 2, 1)], "\(name)")
        }
        stop.flag.store(true, ordering: .releasing)
        let ports = try await forger
        #expect(ports.count >= names.count)
        // Asked again, each name comes from the cache: the real address, never the forged one.
        for name in names {
            let again = try await resolver.resolve(try HostName(name), family: .ipv4)
            #expect(again.addresses.map(\.ip) == [IPAddress(ipv4: 192, 0, 2, 1)])
        }
        let metrics = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        let question = Self.counter(metrics, reason: "question")
        let id = Self.counter(metrics, reason: "id")
        #expect(question >= names.count, "the right ID with the wrong case, each time: \(question)")
        #expect(id >= 1_000, "the other IDs (some are dropped by the kernel's buffer first): \(id)")
        await resolver.shutdown()
    }

    /// A flag the test sets and a helper thread reads.
    final class Stop: Sendable {
        let flag = Atomic<Bool>(false)
    }

    /// The value of `httpdns_serve_upstream_mismatched_total{reason=...}` in a Prometheus text.
    static func counter(_ text: String, reason: String) -> Int {
        let prefix = "httpdns_serve_upstream_mismatched_total{reason=\"\(reason)\"} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return 0 }
        return Int(Double(line.dropFirst(prefix.count)) ?? 0)
    }

    @Test(
        "queries leave from sockets on random ports, a new one after a socket's share, each with a random ID and its name in a random mix of cases"
    )
    func portsIDsAndCaseVary() async throws {
        let upstream = try BoundUDPSocket()
        defer { upstream.close() }
        let client = try PlainDNSClient(
            configuration: .init(servers: [upstream.address], timeout: .seconds(5), queriesPerSocket: 4),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger)
        defer { client.shutdown() }
        let name = try HostName("mixed-case-target.example.test")
        let seen = Mutex<[(port: UInt16, id: UInt16, question: [UInt8])]>([])
        async let answering: Void = offThePool {
            for _ in 0..<16 {
                guard let (query, port) = upstream.receive(within: .seconds(20)),
                    let (_, end) = BoundUDPSocket.question(in: query[...])
                else { return }
                let id = UInt16(query[0]) << 8 | UInt16(query[1])
                seen.withLock { $0.append((port, id, Array(query[12..<end]))) }
                upstream.send(
                    Self.answer(id: id, question: query[12..<end], address: [192, 0, 2, 1], ttl: 60), to: port)
            }
        }
        for _ in 0..<16 {
            let answer = try await client.send(message: DNSWireMessage.query(for: name, type: .a))
            #expect(answer[0] == 0 && answer[1] == 0, "the caller's ID back")
            #expect(
                Array(answer[12..<answer.count - 16]) == Array(DNSWireMessage.query(for: name, type: .a)[12...]),
                "the caller's question back")
        }
        try await answering
        let queries = seen.withLock { $0 }
        #expect(queries.count == 16)
        // Four queries a socket: at least four sockets (the event loops each have theirs).
        #expect(Set(queries.map(\.port)).count >= 4, "\(queries.map(\.port))")
        #expect(Set(queries.map(\.id)).count >= 14, "random IDs")
        #expect(Set(queries.map(\.question)).count >= 14, "a new mix of cases each time")
    }

    @Test("a query whose first try is lost is asked again under a new ID, and the late answer to the first is dropped")
    func lostTryAskedAgain() async throws {
        let upstream = try BoundUDPSocket()
        defer { upstream.close() }
        let mismatched = Mutex<[PlainDNSClient.Mismatch]>([])
        let client = try PlainDNSClient(
            configuration: .init(servers: [upstream.address], timeout: .milliseconds(600), tries: 3),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger,
            mismatched: { reason in mismatched.withLock { $0.append(reason) } })
        defer { client.shutdown() }
        let name = try HostName("lost.example.test")
        async let answering: (UInt16, UInt16) = offThePool {
            guard let (first, firstPort) = upstream.receive(within: .seconds(20)),
                let (second, secondPort) = upstream.receive(within: .seconds(20)),
                let (_, end) = BoundUDPSocket.question(in: second[...])
            else { return (0, 0) }
            let firstID = UInt16(first[0]) << 8 | UInt16(first[1])
            let secondID = UInt16(second[0]) << 8 | UInt16(second[1])
            // The first try's answer arrives late, then the second's.
            upstream.send(
                Self.answer(id: firstID, question: first[12..<end], address: [192, 0, 2, 7], ttl: 60), to: firstPort)
            upstream.send(
                Self.answer(id: secondID, question: second[12..<end], address: [192, 0, 2, 8], ttl: 60), to: secondPort)
            return (firstID, secondID)
        }
        let answer = try await client.send(message: DNSWireMessage.query(for: name, type: .a))
        let ids = try await answering
        #expect(ids.0 != ids.1 || ids.0 == 0, "a new ID for the second try")
        #expect(Array(answer.suffix(4)) == [192, 0, 2, 8], "the second try's answer")
    }

    /// What one path answered: the message's bytes, or the error's code.
    static func outcome(_ work: () async throws -> [UInt8]) async -> String {
        do {
            return try await work().map { String(format: "%02x", $0) }.joined()
        } catch let error as HTTPDNSError {
            return "error \(error.code)"
        } catch {
            return "error \(error)"
        }
    }

    /// What one path resolved: the addresses with their TTLs and the scope, or the error's code.
    static func outcome(_ work: () async throws -> ScopedResolution) async -> String {
        do {
            let answer = try await work()
            return answer.resolution.addresses.map { "\($0.ip)/\($0.ttl)" }.joined(separator: ",")
                + " scope \(answer.scopePrefixLength)"
        } catch let negative as ScopedNegativeAnswer {
            return "error \(negative.error.code) scope \(negative.scopePrefixLength)"
        } catch let error as HTTPDNSError {
            return "error \(error.code)"
        } catch {
            return "error \(error)"
        }
    }

    @Test(
        "differential: the own sockets and c-ares give the same answers from PowerDNS (LUA views with and without a client network, CNAME chains, NXDOMAIN, NODATA, a truncated TXT asked again over TCP, HTTPS, SERVFAIL) and the same timeout from a server that never answers"
    )
    func sameAnswersAsCAres() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        var configuration = CAresResolver.Configuration(servers: [pdns.address], timeout: .seconds(5), tries: 2)
        configuration.randomizesCase = true
        let cares = try CAresResolver(configuration: configuration)
        defer { cares.shutdown() }
        let plain = try PlainDNSResolver(
            configuration: .init(servers: [pdns.address], timeout: .seconds(5), tries: 2),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger)
        defer { plain.shutdown() }
        // Whole messages, as relayed.
        // Types by number: A 1, AAAA 28, TXT 16, HTTPS 65, MX 15.
        let messages: [(String, UInt8)] = [
            ("www.ecs.test", 1), ("www.ecs.test", 28), ("flat.ecs.test", 1), ("alias.ecs.test", 1),
            ("part.ecs.test", 1), ("nope.ecs.test", 1), ("empty.ecs.test", 1), ("big.ecs.test", 16),
            ("web.ecs.test", 65), ("flat.ecs.test", 15), ("broken.ecs.test", 1),
        ]
        for (name, type) in messages {
            var query = DNSWireMessage.query(for: try HostName(name), type: .a)
            query[query.count - 3] = type
            let viaCAres = await Self.outcome { try await cares.send(message: query) }
            let viaSockets = await Self.outcome { try await plain.send(message: query) }
            #expect(viaSockets == viaCAres, "\(name) \(type)")
            if type == 16 { #expect(viaSockets.count / 2 > 512, "the whole TXT, asked again over TCP") }
            #expect(!viaSockets.hasPrefix("error \(HTTPDNSError.Code.timeout)"), "\(name) \(type): \(viaSockets)")
        }
        // Lookups, with and without a client network.
        let subnets = [nil, IPNetwork("198.51.100.0/24"), IPNetwork("203.0.113.0/24"), IPNetwork("2001:db8:1::/48")]
        for name in ["www.ecs.test", "flat.ecs.test", "alias.ecs.test", "part.ecs.test", "nope.ecs.test"] {
            let host = try HostName(name)
            for subnet in subnets {
                let viaCAres = await Self.outcome {
                    guard let subnet else {
                        return ScopedResolution(
                            resolution: try await cares.resolve(host, family: .any), scopePrefixLength: 0)
                    }
                    return try await cares.resolve(host, family: .any, clientSubnet: subnet)
                }
                let viaSockets = await Self.outcome {
                    guard let subnet else {
                        return ScopedResolution(
                            resolution: try await plain.resolve(host, family: .any), scopePrefixLength: 0)
                    }
                    return try await plain.resolve(host, family: .any, clientSubnet: subnet)
                }
                #expect(viaSockets == viaCAres, "\(name) for \(subnet.map { "\($0)" } ?? "no network")")
            }
        }
        // A server that never answers: both give up with a timeout.
        let sink = try BoundUDPSocket()
        defer { sink.close() }
        let silentCAres = try CAresResolver(
            configuration: .init(servers: [sink.address], timeout: .milliseconds(200), tries: 1))
        defer { silentCAres.shutdown() }
        let silentSockets = try PlainDNSResolver(
            configuration: .init(servers: [sink.address], timeout: .milliseconds(200), tries: 1),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger)
        defer { silentSockets.shutdown() }
        let host = try HostName("www.ecs.test")
        let caresTimeout = await Self.outcome {
            ScopedResolution(resolution: try await silentCAres.resolve(host, family: .ipv4), scopePrefixLength: 0)
        }
        let socketsTimeout = await Self.outcome {
            ScopedResolution(resolution: try await silentSockets.resolve(host, family: .ipv4), scopePrefixLength: 0)
        }
        #expect(socketsTimeout == caresTimeout && socketsTimeout == "error \(HTTPDNSError.Code.timeout)")
    }

    @Test(
        "every query over TCP (cares.tcp): a relayed query with the client's own ID is answered with it, as c-ares over TCP answers"
    )
    func tcpOnlyKeepsTheCallersID() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        let plain = try PlainDNSResolver(
            configuration: .init(servers: [pdns.address], timeout: .seconds(5), tries: 2, tcpOnly: true),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger)
        defer { plain.shutdown() }
        var configuration = CAresResolver.Configuration(
            servers: [pdns.address], timeout: .seconds(5), tries: 2, useTCP: true)
        configuration.randomizesCase = true
        let cares = try CAresResolver(configuration: configuration)
        defer { cares.shutdown() }
        var query = DNSWireMessage.query(for: try HostName("big.ecs.test"), type: .a)
        query[query.count - 3] = 16
        (query[0], query[1]) = (0x12, 0x34)
        let viaSockets = try await plain.send(message: query)
        #expect(viaSockets[0] == 0x12 && viaSockets[1] == 0x34, "the caller's ID back")
        #expect(viaSockets.count > 512 && viaSockets[3] & 0x0F == 0, "the whole TXT")
        let viaCAres = try await cares.send(message: query)
        #expect(Array(viaSockets[2...]) == Array(viaCAres[2...]))
    }

    @Test("with two servers a SERVFAIL from the first is not the answer: the second is asked, as c-ares does")
    func servfailAsksTheNextServer() async throws {
        let pdns = try await PowerDNS.start()
        defer { pdns.stop() }
        let failing = try BoundUDPSocket()
        defer { failing.close() }
        let client = try PlainDNSClient(
            configuration: .init(servers: [failing.address, pdns.address], timeout: .seconds(5), tries: 1),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Self.logger)
        defer { client.shutdown() }
        async let refusing: Bool = offThePool {
            guard let (query, port) = failing.receive(within: .seconds(20)) else { return false }
            var answer = query
            answer[2] |= 0x80
            answer[3] = (answer[3] & 0xF0) | 2
            return failing.send(answer, to: port)
        }
        let answer = try await client.send(message: DNSWireMessage.query(for: try HostName("flat.ecs.test"), type: .a))
        #expect(try await refusing, "the first server was asked and answered SERVFAIL")
        #expect(answer[3] & 0x0F == 0 && Array(answer.suffix(4)) == [192, 0, 2, 50], "the second server's answer")
    }
}
