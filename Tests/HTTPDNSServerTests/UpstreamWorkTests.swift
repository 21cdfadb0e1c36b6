import Foundation
import Glibc
import Logging
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

    /// A server whose only upstream is c-ares asking `sink` (which never answers; 2 s per try, 3 tries), with
    /// `fast.test` as an override, plain DNS on 127.0.0.1 and `perNetwork` upstream places per network.
    struct Lab {
        let sink: BoundUDPSocket
        let resolver: HostResolver
        let server: HTTPDNSServer
        var dnsPort: Int { server.dnsPort ?? 0 }

        static func start(perNetwork: Int) async throws -> Lab {
            let sink = try BoundUDPSocket()
            let cares = try CAresResolver(configuration: .init(servers: [sink.address], timeout: .seconds(2), tries: 3))
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
                configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
                logger: logger)
            return Lab(sink: sink, resolver: resolver, server: server)
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
        "a flood of uncached names from one network: only its bound reaches the upstream, the rest get SERVFAIL at once, another network is answered; a closed connection cancels its lookups and gives their places back"
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
        let names = (0..<100).map { "r\($0).flood.test" }
        // 100 names pipelined on one connection, and what the upstream sees meanwhile.
        // The windows are long for a loaded suite (CI once saw no answer within 1 s); the 92 refusals end the wait, and
        // the 8 admitted lookups stay open for 6 s (3 tries of 2 s), so they cannot be counted as answered meanwhile.
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
        // The client goes away: its lookups are cancelled and their places are free for the network's next queries.
        // (c-ares 1.18 cannot cancel one query of a channel: the dropped queries' remaining tries, at most two each
        // here, still go out, and their answers are dropped.)
        close(fd)
        try await Task.sleep(for: .milliseconds(300))
        async let later = offThePool { lab.sink.questions(during: .seconds(3)) }
        let fresh = (0..<8).map { "n\($0).flood.test" }
        let (again, freshCodes) = try await offThePool { try Self.pipeline(lab.dnsPort, fresh, wait: .seconds(1)) }
        defer { close(again) }
        #expect(freshCodes.values.allSatisfy { $0 != 2 }, "places given back: \(freshCodes)")
        let retried = try await later.filter { asked.contains($0) }
        #expect(retried.count <= asked.count * 2, "only c-ares's remaining tries: \(retried)")
    }

    @Test(
        "a forwarding loop (the server's forwarder is the server itself, as CoreDNS `forward .` on ClusterFirst DNS makes it) is seen at its first turn: SERVFAIL, one looped query"
    )
    func forwardingLoop() async throws {
        let port = try FreePort.udp()
        let own = ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: port)
        let cares = try CAresResolver(configuration: .init(servers: [own], timeout: .seconds(2), tries: 2))
        let resolver = HostResolver(upstreams: [], cache: nil, prober: nil, onShutdown: [{ cares.shutdown() }])
        let registry = PrometheusCollectorRegistry()
        let service = HTTPDNSService(
            resolver: resolver, configuration: .init(otherTypes: .forward), logger: Self.logger,
            metricsFactory: PrometheusMetricsFactory(registry: registry), forwarder: CAresForwarder(resolver: cares),
            metricsExporter: { registry.emitToBuffer() })
        let server = try await HTTPDNSServer.start(
            service: service, configuration: .init(port: 0, dnsListen: own), logger: Self.logger)
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
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }
}
