import Foundation
import Glibc
import Logging
import NIOCore
import NIOHTTP2
import Prometheus
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// Upstream work follows the askers: a flood of names no cache holds from one network reaches the upstream only up to
/// that network's bound (the rest is answered SERVFAIL at once, another network is answered as before), and a lookup
/// whose client went away is cancelled and gives its place back.
@Suite("HTTP DNS server: upstream work bounded per network and cancelled with its asker")
struct UpstreamWorkTests {
    static let logger = Logger(label: "upstream-work-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A server whose only upstream is c-ares asking `sink` (which never answers; 2 tries, of 4 s and then 8 s, both
    /// stretched by the time scale, so c-ares gives up 12 s after the admission: longer than any step before a check
    /// that places are still held, however slow the run), with
    /// `fast.test` as an override, plain DNS on 127.0.0.1 and `perNetwork` upstream places per network.
    struct Lab {
        let sink: BoundUDPSocket
        let resolver: HostResolver
        let service: HTTPDNSService
        let server: HTTPDNSServer
        var dnsPort: Int { server.dnsPort ?? 0 }

        static func start(perNetwork: Int, tls: TestCertificates.Leaf? = nil) async throws -> Lab {
            let sink = try BoundUDPSocket()
            let cares = try CAresResolver(
                configuration: .init(servers: [sink.address], timeout: TestTiming.scaled(.seconds(4)), tries: 2))
            let overrides = HostOverrides()
            overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("fast.test"))
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], overrides: overrides,
                cache: HostCache(), prober: nil, onShutdown: [{ cares.shutdown() }])
            let service = HTTPDNSService(
                resolver: resolver, configuration: .init(maximumUpstreamLookupsPerNetwork: perNetwork),
                logger: logger)
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    port: 0, certificatePath: tls?.certificatePath, privateKeyPath: tls?.keyPath,
                    dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
                logger: logger)
            return Lab(sink: sink, resolver: resolver, service: service, server: server)
        }

        func stop() async {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            sink.close()
        }
    }

    /// Sends `names` as pipelined TCP DNS queries (IDs 1, 2, ...) on a new connection from 127.0.0.1 and returns it
    /// with the response codes of the answers that arrive within `wait` (or until `enough` have arrived), by ID.
    static func pipeline(
        _ port: Int, _ names: [String], type: UInt16 = 1, wait: Duration, enough: Int? = nil
    ) throws -> (fd: Int32, codes: [UInt16: UInt8]) {
        let fd = try LoopbackTCP.connect(port: port, receiveTimeout: .seconds(1))
        var bytes: [UInt8] = []
        for (index, name) in names.enumerated() {
            let query = DNSTransportTests.query(name, type: type, id: UInt16(index + 1))
            bytes += [UInt8(query.count >> 8), UInt8(query.count & 0xFF)] + query
        }
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var codes: [UInt16: UInt8] = [:]
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = ContinuousClock.now + wait
        while ContinuousClock.now < deadline, codes.count < (enough ?? names.count) {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 20) == 1 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
            while received.count >= 2, received.count >= 2 + (Int(received[0]) << 8 | Int(received[1])) {
                let length = Int(received[0]) << 8 | Int(received[1])
                let message = Array(received[2..<2 + length])
                received.removeFirst(2 + length)
                if message.count >= 4 { codes[UInt16(message[0]) << 8 | UInt16(message[1])] = message[3] & 0x0F }
            }
        }
        return (fd, codes)
    }

    @Test(
        "a flood of uncached names from one network: only its bound reaches the upstream, the rest get SERVFAIL at once, another network is answered; a closed connection cancels its lookups, whose places come back when c-ares's tries end"
    )
    func floodBoundedAndCancelled() async throws {
        let lab = try await Lab.start(perNetwork: 8)
        do {
            try await floodBoundedAndCancelled(lab)
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }

    private func floodBoundedAndCancelled(_ lab: Lab) async throws {
        let started = ContinuousClock.now
        let names = (0..<100).map { "r\($0).flood.test" }
        // 100 names pipelined on one connection, and what the upstream sees meanwhile.
        // The windows are long for a loaded suite (CI once saw no answer within 1 s); the 92 refusals end the wait, and
        // the 8 admitted lookups stay open for 12 s, so they cannot be counted as answered meanwhile.
        async let seen = offThePool { lab.sink.questions(during: TestTiming.scaled(.seconds(3))) }
        let (fd, codes) = try await offThePool {
            try Self.pipeline(lab.dnsPort, names, wait: TestTiming.scaled(.seconds(5)), enough: 92)
        }
        let refused = codes.values.filter { $0 == 2 }.count
        #expect(refused == 92, "SERVFAIL at once past the network's 8 places: \(refused) of \(codes.count) answers")
        // Another network (127.0.1.0/24) is answered from the overrides meanwhile.
        let other = try await DNSTransportTests.udp(
            lab.dnsPort, DNSTransportTests.query("fast.test", id: 9), from: "127.0.1.1")
        #expect(try DNSTransportTests.addresses(try #require(other), "fast.test") == ["127.0.0.5"])
        let asked = Set(try await seen.filter { $0.hasSuffix("flood.test") })
        #expect(asked.count <= 8, "the upstream was asked for \(asked.count) names: \(asked.sorted())")
        #expect(!asked.isEmpty)
        // The client goes away: its lookups are cancelled. c-ares 1.18 cannot cancel one query of a channel, so the
        // dropped queries' remaining tries (at most one each here) still go out, their answers dropped, and their
        // places stay taken until those tries end (12 s from the admission): a new connection of the same network is
        // refused meanwhile, and admitted after.
        close(fd)
        // What the upstream sees from here on: the dropped names' remaining tries, and none of the fresh names below.
        async let later = offThePool { lab.sink.questions(during: TestTiming.scaled(.seconds(8))) }
        try await Task.sleep(for: .milliseconds(300))
        let fresh = (0..<8).map { "n\($0).flood.test" }
        let (held, heldCodes) = try await offThePool {
            try Self.pipeline(lab.dnsPort, fresh, wait: TestTiming.scaled(.seconds(5)), enough: 8)
        }
        close(held)
        // Refused, not admitted: every answer that came is SERVFAIL, and (below) the upstream never saw these names.
        // How many refusals arrive within the wait depends on the machine's load, so that count is not the test.
        #expect(heldCodes.values.allSatisfy { $0 == 2 }, "places still held by c-ares's tries: \(heldCodes)")
        // Then they come back (a loaded suite can start the clock late: asked until a new name is admitted).
        // An admitted name is answered SERVFAIL too, once c-ares's tries end 12 s later: an answer counts as a
        // refusal only if it came within 5 s.
        let back = try await Self.placeComesBack(started: started) { attempt in
            let asked = ContinuousClock.now
            let (fd, codes) = try await offThePool {
                try Self.pipeline(lab.dnsPort, ["b\(attempt).flood.test"], wait: TestTiming.scaled(.seconds(3)))
            }
            close(fd)
            return ContinuousClock.now - asked < .seconds(5) ? codes[1] : nil
        }
        #expect(back, "places given back")
        let afterClose = try await later
        let retried = afterClose.filter { asked.contains($0) }
        #expect(retried.count <= asked.count, "only c-ares's remaining try: \(retried)")
        let admitted = afterClose.filter { fresh.contains($0) }
        #expect(admitted.isEmpty, "places still held by c-ares's tries, yet the upstream was asked for \(admitted)")
    }

    @Test(
        "a heavy client network's burst past its share waits briefly for its places and is answered, not refused (without the wait it is refused)"
    )
    func burstWaitsForPlaces() async throws {
        let dnsmasq = try await DNSMasq.start()
        defer { dnsmasq.stop() }
        for wait in [Duration.seconds(5), .zero] {
            let cares = try CAresResolver(configuration: .init(servers: [dnsmasq.address], timeout: .seconds(2)))
            let resolver = HostResolver(
                upstreams: [.init(name: "cares", kind: .cares, resolver: cares)], cache: HostCache(), prober: nil,
                onShutdown: [{ cares.shutdown() }])
            let service = HTTPDNSService(
                resolver: resolver,
                configuration: .init(maximumUpstreamLookupsPerNetwork: 4, upstreamQueueWait: wait), logger: Self.logger)
            let server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
                logger: Self.logger)
            // 20 new names in one write: 4 places, and 16 (4 shares) may wait for them.
            let names = (0..<20).map { "w\($0).burst.test" }
            let (fd, codes) = try await offThePool {
                try Self.pipeline(server.dnsPort ?? 0, names, wait: TestTiming.scaled(.seconds(10)))
            }
            close(fd)
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            let refused = codes.values.filter { $0 == 2 }.count
            if wait > .zero {
                #expect(codes.count == 20, "every query answered: \(codes.count)")
                #expect(refused == 0, "NXDOMAIN from dnsmasq for every name, no SERVFAIL: \(codes)")
                #expect(service.upstreamBudget.queued == 0 && service.upstreamBudget.inFlight == 0)
            } else {
                #expect(refused > 0, "refused at once without the wait: \(codes)")
            }
        }
    }

    @Test(
        "HTTP/2: streams for new names reset by the client at once (900 of them, within nghttp2's reset allowance) reach the upstream only up to the network's bound"
    )
    func http2ResetFlood() async throws {
        let certificates = try TestCertificates()
        defer { certificates.remove() }
        let lab = try await Lab.start(perNetwork: 8, tls: try certificates.leaf(for: "doh.test"))
        do {
            let client = try await HostileClientTests.H2Client.connect(port: lab.server.port, ca: certificates.caPath)
            async let seen = offThePool { lab.sink.questions(during: TestTiming.scaled(.seconds(4))) }
            // Rounds of 90 streams (the server allows 100 at once), each HEADERS then at once RST_STREAM (CANCEL).
            var stream = 1
            for round in 0..<10 {
                var frames: [HTTP2Frame] = []
                for index in 0..<90 {
                    frames.append(
                        client.headers("GET", "/resolve?name=h\(round)-\(index).reset.test", stream: stream, end: true))
                    frames.append(HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .rstStream(.cancel)))
                    stream += 2
                }
                client.send(frames)
                try await Task.sleep(for: .milliseconds(50))
            }
            let asked = Set(try await seen.filter { $0.hasSuffix("reset.test") })
            // Without the bound and the held places, each reset stream was a query upstream: 900 of them.
            #expect(asked.count <= 8, "the upstream was asked for \(asked.count) names")
            try? await client.channel.close()
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }

    @Test(
        "a client that opens connections, asks for new names and closes them at once reaches the upstream only up to its network's bound: abandoned c-ares lookups keep their places while their tries go out"
    )
    func connectAndDropFlood() async throws {
        let lab = try await Lab.start(perNetwork: 8)
        do {
            // 40 connections of 8 new names each, closed at once: 320 lookups abandoned within a few seconds.
            async let seen = offThePool { lab.sink.questions(during: TestTiming.scaled(.seconds(4))) }
            for round in 0..<40 {
                let names = (0..<8).map { "d\(round)-\($0).drop.test" }
                let (fd, _) = try await offThePool {
                    try Self.pipeline(lab.dnsPort, names, wait: .milliseconds(50))
                }
                close(fd)
            }
            let asked = Set(try await seen.filter { $0.hasSuffix("drop.test") })
            // Without the held places every dropped connection's names went upstream: 320 of them.
            #expect(asked.count <= 8, "the upstream was asked for \(asked.count) names")
            // The later rounds waited in the network's queue (the places were held) and left it with their
            // connections: nothing of theirs is queued, nothing more went upstream.
            #expect(lab.service.upstreamBudget.queued == 0, "closed connections' names left the queue")
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }

    @Test(
        "a forwarding loop (the server's forwarder is the server itself, as CoreDNS `forward .` on ClusterFirst DNS makes it) is seen at its first turn: SERVFAIL, one looped query"
    )
    func forwardingLoop() async throws {
        // The server's own DNS port is its forwarder, so the port is chosen first: one free for UDP and TCP a moment
        // ago, and another one if something took it meanwhile (a CI run once lost it to a parallel test).
        var attempt = 0
        while true {
            attempt += 1
            let port = try FreePort.udpAndTCP()
            let own = ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: port)
            let cares = try CAresResolver(configuration: .init(servers: [own], timeout: .seconds(2), tries: 2))
            let resolver = HostResolver(upstreams: [], cache: nil, prober: nil, onShutdown: [{ cares.shutdown() }])
            let registry = PrometheusCollectorRegistry()
            let service = HTTPDNSService(
                resolver: resolver, configuration: .init(otherTypes: .forward), logger: Self.logger,
                metricsFactory: PrometheusMetricsFactory(registry: registry),
                forwarder: CAresForwarder(resolver: cares), metricsExporter: { registry.emitToBuffer() })
            let server: HTTPDNSServer
            do {
                server = try await HTTPDNSServer.start(
                    service: service, configuration: .init(port: 0, dnsListen: own), logger: Self.logger)
            } catch  where attempt < 5 {
                await resolver.shutdown()
                continue
            }
            do {
                try await forwardingLoop(port: port, registry: registry)
            } catch {
                await server.shutdown(grace: .milliseconds(100))
                await resolver.shutdown()
                throw error
            }
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            return
        }
    }

    private func forwardingLoop(port: UInt16, registry: PrometheusCollectorRegistry) async throws {
        let (fd, codes) = try await offThePool {
            try Self.pipeline(Int(port), ["loop.test"], type: 16, wait: TestTiming.scaled(.seconds(20)))
        }
        close(fd)
        #expect(codes[1] == 2, "SERVFAIL: \(codes)")
        // The looped query came back and was refused at once: c-ares may try its one server once more after a
        // SERVFAIL (two tries), never the hundreds of turns an unmarked loop makes.
        let metrics = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        let line = metrics.split(separator: "\n").first {
            $0.hasPrefix(#"httpdns_serve_queries_total{transport="udp"}"#)
        }
        let looped = line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        #expect((1...2).contains(looped), "\(line ?? "no UDP query counted")")
    }

    /// Whether a network's places come back: `ask(attempt)` asks for a new name and gives its response code (`nil`:
    /// admitted, so it waits for the upstream; a refusal comes at once), every half second until it is admitted, for
    /// up to 30 s (scaled). It must not be admitted in the first 5 s after `started`, while c-ares's tries still
    /// hold the places.
    static func placeComesBack(
        started: ContinuousClock.Instant, _ ask: (Int) async throws -> UInt8?
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + TestTiming.scaled(.seconds(30))
        var attempt = 0
        while ContinuousClock.now < deadline {
            let code = try await ask(attempt)
            if code == nil {
                #expect(ContinuousClock.now - started > .seconds(5), "a place came back before c-ares's tries ended")
                return true
            }
            attempt += 1
            try await Task.sleep(for: .milliseconds(500))
        }
        return false
    }

    /// Sends `query` over UDP from a new socket bound to 127.0.0.1 and returns the socket, unanswered yet.
    static func sendUDP(_ port: Int, _ query: [UInt8]) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, query, query.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard sent == query.count else {
            close(fd)
            throw POSIXError(.EIO)
        }
        return fd
    }

    @Test(
        "UDP: a query still waiting for an upstream after 5 s is given up: no late answer is ever sent (a retry could take it for its own), and its place comes back when c-ares's tries end"
    )
    func udpAskerGivenUp() async throws {
        // The upstream never answers, and c-ares gives up at 12 s, when it would answer SERVFAIL.
        let lab = try await Lab.start(perNetwork: 4)
        do {
            try await udpAskerGivenUp(lab)
        } catch {
            await lab.stop()
            throw error
        }
        await lab.stop()
    }

    private func udpAskerGivenUp(_ lab: Lab) async throws {
        let started = ContinuousClock.now
        // Four queries from 127.0.0.1 take its network's four places; a fifth is answered TC at once.
        var askers: [Int32] = []
        for index in 0..<4 {
            askers.append(try Self.sendUDP(lab.dnsPort, DNSTransportTests.query("u\(index).udp.test", id: 1)))
        }
        defer { for fd in askers { close(fd) } }
        // Until the four hold their places: a fixed wait was not always enough on a loaded machine (300 ms, in a CI run
        // of the whole suite), and the fifth then took a place and waited on the silent upstream.
        #expect(try await waitUntil { lab.service.upstreamBudget.inFlight == 4 }, "the four are waiting")
        let refused = try #require(
            try await DNSTransportTests.udp(lab.dnsPort, DNSTransportTests.query("u4.udp.test", id: 2)))
        #expect(refused[2] & 0x02 != 0, "TC at the network's bound: the client asks again over TCP")
        // Once c-ares's tries end (12 s from the admission) the places are back: a new query waits for the upstream
        // instead of being refused. The askers given up at 5 s still have nothing then, and half a second later.
        let back = try await Self.placeComesBack(started: started) { attempt in
            let answer = try await DNSTransportTests.udp(
                lab.dnsPort, DNSTransportTests.query("b\(attempt).udp.test", id: 3),
                wait: TestTiming.scaled(.seconds(3)))
            return answer.map { $0[3] & 0x0F }
        }
        #expect(back, "places given back")
        try await Task.sleep(for: .milliseconds(500))
        let given = askers
        let late = try await offThePool {
            given.filter { fd in
                var buffer = [UInt8](repeating: 0, count: 512)
                return recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0
            }.count
        }
        #expect(late == 0, "\(late) given-up askers got a late answer")
    }
}
