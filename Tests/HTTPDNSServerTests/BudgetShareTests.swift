import Glibc
import Logging
import NIOCore
import NIOEmbedded
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCore
@testable import HTTPDNSServer

/// The shares of docs/security.md that the third wave's review left open: places at the connection limit move
/// towards an even share and never back (a network that opens and drops connections cannot churn out the keep-alive
/// connections of others), an IPv6 block of sixteen /48s holds at most a quarter of each global bound, and sources
/// that cannot be forged (TCP, TLS, HTTPS, cookie-verified UDP) have a rate by default.
@Suite("HTTP DNS server: even shares of the global bounds")
struct BudgetShareTests {
    static let logger = Logger(label: "budget-share-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Whether the peer closed `fd` (a read returns 0 or fails), waiting at most the socket's receive timeout.
    static func closedByPeer(_ fd: Int32) async throws -> Bool {
        try await offThePool {
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, 0) <= 0
        }
    }

    @Test(
        "at the connection limit a network that opens and drops connections takes places only from networks holding more than it: it ends with its even share, and every other keep-alive connection stays"
    )
    func churnTakesOnlyAnEvenShare() async throws {
        let resolver = HostResolver(upstreams: [], overrides: HostOverrides(), cache: nil, prober: nil)
        let service = HTTPDNSService(resolver: resolver, logger: Self.logger)
        let server = try await HTTPDNSServer.start(
            service: service,
            configuration: .init(port: 0, maximumConnections: 8, maximumConnectionsPerClient: 4),
            logger: Self.logger)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        // Two networks (/24s) at their own limit, every connection idle after one request: the table is full.
        var first: [Int32] = []
        var second: [Int32] = []
        for (source, into) in [("127.0.1.2", 0), ("127.0.2.2", 1)] {
            for _ in 0..<4 {
                let fd = try LoopbackTCP.connect(port: server.port, receiveTimeout: .seconds(3), from: source)
                held.append(fd)
                #expect(try await offThePool { ThirdWaveTests.get(fd, "/healthz") } == 200)
                if into == 0 { first.append(fd) } else { second.append(fd) }
            }
        }
        // The churning network: twelve new connections, each asking once, the oldest dropped at its own limit of
        // four (before: every new connection shed the longest-idle one, whosever it was: four places moved).
        var own: [Int32] = []
        var answered = 0
        for _ in 0..<12 {
            let fd = try LoopbackTCP.connect(port: server.port, receiveTimeout: .seconds(3), from: "127.0.3.2")
            held.append(fd)
            if try await offThePool({ ThirdWaveTests.get(fd, "/healthz") }) == 200 {
                answered += 1
                own.append(fd)
            }
            if own.count >= 4 {
                close(own.removeFirst())
                // The server sees the close before the next connect.
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(answered >= 2, "the newcomer network gets places")
        // Two places moved, one from each network (4, 4, 0 became 3, 3, 2), each that network's longest-idle.
        #expect(server.protocolCounts.shed == 2, "\(server.protocolCounts)")
        #expect(try await Self.closedByPeer(first[0]), "the first network's longest-idle connection gave way")
        #expect(try await Self.closedByPeer(second[0]), "the second network's longest-idle connection gave way")
        for fd in first.dropFirst() + second.dropFirst() {
            #expect(try await offThePool { ThirdWaveTests.get(fd, "/healthz") } == 200, "a keep-alive connection stays")
        }
        await server.shutdown(grace: .milliseconds(100))
        await resolver.shutdown()
    }

    /// Admits an embedded connection from `address` to `table`, idle from now on; `nil` when refused.
    static func admitIdle(_ address: String, _ table: Connections, into channels: inout [EmbeddedChannel])
        -> EmbeddedChannel?
    {
        let channel = EmbeddedChannel()
        channels.append(channel)
        guard let activity = table.admit(channel, client: ClientNetwork(IPAddress(address))) else { return nil }
        activity.idle(since: .now())
        return channel
    }

    @Test(
        "at the limit the /48s of one IPv6 /32 take no place past a quarter of the connections; below it they are not held back; other blocks and IPv4 take places from them"
    )
    func ipv6BlockHoldsAQuarter() {
        let counts = Locked(HTTPDNSServer.ProtocolCounts())
        let table = Connections(limit: 64, perClient: 4, counts: counts, metrics: nil, logger: Self.logger)
        var channels: [EmbeddedChannel] = []
        defer { for channel in channels { _ = try? channel.finish() } }
        // Sixteen /48s of 2001:db8::/32, four connections each: below the limit every one is taken (a carrier's
        // /32 may be many customers), and the table is full.
        var admitted = 0
        for network in 0..<16 {
            for host in 0..<4 {
                let address = "2001:db8:\(String(network, radix: 16))::\(host + 1)"
                if Self.admitIdle(address, table, into: &channels) != nil { admitted += 1 }
            }
        }
        #expect(admitted == 64)
        // Full: the block holds more than its quarter (16), so another of its /48s takes nothing.
        #expect(Self.admitIdle("2001:db8:20::1", table, into: &channels) == nil)
        // Another /32 and an IPv4 /24 take places from the block's networks.
        #expect(Self.admitIdle("2001:db9:1::1", table, into: &channels) != nil)
        #expect(Self.admitIdle("198.51.100.7", table, into: &channels) != nil)
        #expect(counts.withLock { $0.shed } == 2)
    }

    @Test(
        "a table full of single connections from as many networks still takes newcomers (the longest-idle gives way), and a network that drops and retakes places takes at most its limit a minute"
    )
    func singleConnectionsAndShedBudget() {
        let counts = Locked(HTTPDNSServer.ProtocolCounts())
        let table = Connections(limit: 8, perClient: 4, counts: counts, metrics: nil, logger: Self.logger)
        var channels: [EmbeddedChannel] = []
        defer { for channel in channels { _ = try? channel.finish() } }
        for network in 0..<8 { #expect(Self.admitIdle("198.51.\(network).7", table, into: &channels) != nil) }
        // The churning network takes a place (a newcomer holding none displaces a network holding one), drops it,
        // a returning client refills the table, and again.
        var taken = 0
        for round in 0..<6 {
            guard let own = Self.admitIdle("203.0.113.9", table, into: &channels) else { continue }
            taken += 1
            _ = try? own.close().wait()
            own.embeddedEventLoop.run()  // the table hears of the close
            #expect(Self.admitIdle("198.51.\(20 + round).7", table, into: &channels) != nil, "refilled")
        }
        #expect(taken == 4, "its limit (4) of places taken from others, then refused")
        #expect(counts.withLock { $0.shed } == 4)
    }

    @Test(
        "upstream places: once half the total is taken, the /48s of one IPv6 /32 get no more past four networks' worth; another block still does"
    )
    func ipv6BlockUpstreamPlaces() throws {
        let budget = UpstreamBudget()
        let bounds = UpstreamBudget.Bounds(total: 1_024, perNetwork: 64)
        var taken: [UpstreamBudget.Ticket] = []
        for network in 0..<16 {
            for _ in 0..<64 {
                let address = IPAddress("2001:db8:\(String(network, radix: 16))::1")
                if let ticket = budget.admit(address, unverified: false, kind: .lookup, bounds: bounds) {
                    taken.append(ticket)
                }
            }
        }
        // Below half the total the block is not held back; past it, it takes nothing more (it holds 512 > 256).
        #expect(taken.count == 512, "half of 1,024, then the block's quarter holds")
        let elsewhere = budget.admit(IPAddress("2001:db9::1"), unverified: false, kind: .lookup, bounds: bounds)
        #expect(elsewhere != nil)
        // Places given back come back to the block.
        for ticket in taken { budget.release(ticket) }
        #expect(budget.admit(IPAddress("2001:db8:f::1"), unverified: false, kind: .lookup, bounds: bounds) != nil)
    }

    @Test(
        "upstream queue: past its share a network waits, in order, up to four shares; a place given back goes to its first waiter, a withdrawn one gets none, unverified (UDP) requests never wait"
    )
    func upstreamQueue() throws {
        let budget = UpstreamBudget()
        let bounds = UpstreamBudget.Bounds(total: 64, perNetwork: 2)
        let client = IPAddress("198.51.100.7")
        let granted = Locked<[Int]>([])
        func admit(_ tag: Int, from client: IPAddress? = client, unverified: Bool = false) -> UpstreamBudget.Admission {
            budget.admit(client, unverified: unverified, kind: .lookup, bounds: bounds, prefixes: ClientPrefixes()) {
                _ in granted.withLock { $0.append(tag) }
            }
        }
        var tickets: [UpstreamBudget.Ticket] = []
        var places: [Int: UpstreamBudget.QueuedPlace] = [:]
        for tag in 0..<11 {
            switch admit(tag) {
            case .admitted(let ticket): tickets.append(ticket)
            case .queued(let place): places[tag] = place
            case .refused: #expect(tag == 10, "only the eleventh is refused: 2 places, 8 waiting")
            }
        }
        #expect(tickets.count == 2 && places.count == 8 && budget.queued == 8)
        // The waiter at 3 leaves; the place given back goes to 2, the next to 4.
        #expect(budget.withdraw(places[3]!))
        #expect(!budget.withdraw(places[3]!), "withdrawn once")
        budget.release(tickets[0])
        budget.release(tickets[1])
        #expect(granted.withLock { $0 } == [2, 4])
        #expect(!budget.withdraw(places[2]!), "a waiter given a place is no longer in the queue")
        #expect(budget.inFlight == 2 && budget.queued == 5, "places handed over, not given back")
        // Another network is admitted at once meanwhile.
        guard case .admitted = admit(99, from: IPAddress("203.0.113.9")) else {
            Issue.record("another network waits behind this one")
            return
        }
        // Unverified (UDP) requests never wait: refused at the share (TC: the client asks again over TCP).
        let udp = (0..<3).map { admit(100 + $0, from: IPAddress("198.18.0.1"), unverified: true) }
        let outcomes = udp.map { admission -> String in
            switch admission {
            case .admitted: "admitted"
            case .queued: "queued"
            case .refused: "refused"
            }
        }
        #expect(outcomes == ["admitted", "admitted", "refused"])
    }

    @Test("upstream queue: a network waits with at most an eighth of the total; eight networks are needed to fill it")
    func upstreamQueueCap() throws {
        let budget = UpstreamBudget()
        let bounds = UpstreamBudget.Bounds(total: 256, perNetwork: 16)
        #expect(UpstreamBudget.queueCap(bounds) == 32, "an eighth of 256, under four shares (64)")
        var queued: [Int: Int] = [:]
        for network in 0..<9 {
            for _ in 0..<100 {
                if case .queued = budget.admit(
                    IPAddress("203.0.\(network).1"), unverified: false, kind: .lookup, bounds: bounds,
                    prefixes: ClientPrefixes(), queueing: { _ in })
                {
                    queued[network, default: 0] += 1
                }
            }
        }
        #expect(queued.values.allSatisfy { $0 == 32 } && queued.count == 8, "eight networks of 32 fill 256: \(queued)")
        #expect(budget.queued == 256)
    }

    @Test("TLS handshakes: once the total's bucket is down to half, the /48s of one IPv6 /32 share four networks' rate")
    func ipv6BlockHandshakes() throws {
        let budget = HandshakeBudget(perSecond: 160, prefixes: ClientPrefixes())
        let now = ContinuousClock.now
        // A network's burst is 20 (twice a sixteenth of 160); the block's is 80, spent as they come; the total's
        // 320 is down to half after 160, and from then on the spent block bucket refuses.
        var taken = 0
        for network in 0..<16 {
            for _ in 0..<20 where budget.admit(IPAddress("2001:db8:\(String(network, radix: 16))::1"), now: now) {
                taken += 1
            }
        }
        #expect(taken == 160)
        #expect(budget.admit(IPAddress("2001:db9::1"), now: now), "another block")
    }

    @Test(
        "a cookie-verified UDP client is past the UDP rate but within the verified one, which is on by default (2,000 a second, bursts of 4,000)"
    )
    func verifiedRateOnByDefault() throws {
        let configuration = HTTPDNSService.Configuration()
        #expect(configuration.rateLimitPerSecond == 2_000 && configuration.rateLimitBurst == 4_000)
        let limiter = RateLimiter(limits: configuration.limits)
        let now = ContinuousClock.now
        let client = IPAddress("198.51.100.7")
        let verified = (0..<5_000).filter { _ in limiter.admit(client, unverified: false, now: now) == nil }.count
        #expect(verified == 4_000)
        let udp = (0..<5_000).filter { _ in limiter.admit(client, unverified: true, now: now) == nil }.count
        #expect(udp == 1_000, "UDP without a cookie: its own, stricter bucket")
        #expect(limiter.admit(client, unverified: false, now: now + .seconds(1)) == nil, "2,000 more a second later")
    }
}
