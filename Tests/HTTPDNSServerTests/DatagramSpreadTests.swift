import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// The UDP listener's sockets (one per event loop, one port) share its datagrams at random, not by the client's
/// address and port: one client socket reaches every loop.
@Suite("HTTP DNS server: UDP datagrams spread over the event loops")
struct DatagramSpreadTests {
    static let logger = Logger(label: "datagram-spread-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test(
        "UDP: 40 queries from one client socket while one of two event loops is held busy: the free loop answers some at once, the held one the rest once free (by address and port, all would go to one loop)"
    )
    func oneClientReachesEveryLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let overrides = HostOverrides()
        overrides.set([IPAddress(ipv4: 127, 0, 0, 5)], for: try HostPattern("spread.test"))
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: HostCache(), prober: nil)
        let service = HTTPDNSService(resolver: resolver, configuration: .init(), logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, dnsListen: ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: 0)),
            logger: Self.logger, eventLoopGroup: group)
        try await withCleanup { () async throws in
            let port = try #require(server.dnsPort)
            let held = TestTiming.scaled(.seconds(2))
            // One loop sleeps: what reaches its socket waits until it wakes. The queries go once it sleeps.
            let loops = Array(group.makeIterator())
            let sleeping = Flag()
            let waking = loops[0].submit {
                sleeping.raised.store(true, ordering: .releasing)
                _ = usleep(UInt32(held / .microseconds(1)))
            }
            while !sleeping.raised.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(5)) }
            let answered = try await offThePool {
                try Self.exchange(port: port, count: 40, early: held / 2, late: held * 2)
            }
            try await waking.get()
            #expect(
                answered.early > 0 && answered.early < 40,
                "\(answered.early) of 40 answered while a loop was held: all or none means one loop took them all")
            #expect(answered.all == 40, "\(answered.all) of 40 answered in all")
        } cleanup: {
            await server.shutdown(grace: .milliseconds(100))
            await resolver.shutdown()
            try? await group.shutdownGracefully()
        }
    }

    /// Raised from another thread.
    final class Flag: Sendable {
        let raised = Atomic<Bool>(false)
    }

    /// Sends `count` queries for `spread.test` from one socket and counts the distinct answers that arrive within
    /// `early`, and within `late` in all.
    static func exchange(port: Int, count: Int, early: Duration, late: Duration) throws -> (early: Int, all: Int) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        for id in 1...count {
            let query = DNSTransportTests.query("spread.test", id: UInt16(id))
            guard send(fd, query, query.count, 0) == query.count else { throw POSIXError(.EIO) }
        }
        let started = ContinuousClock.now
        var ids = Set<Int>()
        var answeredEarly = 0
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while ContinuousClock.now - started < late, ids.count < count {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 20) == 1 else { continue }
            let received = recv(fd, &buffer, buffer.count, 0)
            guard received >= 12 else { continue }
            ids.insert(Int(buffer[0]) << 8 | Int(buffer[1]))
            if ContinuousClock.now - started < early { answeredEarly = ids.count }
        }
        return (answeredEarly, ids.count)
    }
}
