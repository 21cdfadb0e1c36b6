import Foundation
import NIOCore
import Synchronization
import Testing
import TestSupport

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// Override addresses get the same scores as upstream answers; failed addresses back off; connect times and times
/// to first byte stay apart.
@Suite("Scoring of override addresses, back-off and connection races")
struct OverrideScoringTests {
    @Test("a failure makes an address back off behind healthy ones, doubling per failure in a row; an answer ends it")
    func backoff() {
        let clock = ManualClock()
        let policy = ScoringPolicy(
            failurePenaltyMilliseconds: 1, failureBackoff: .seconds(5), maximumFailureBackoff: .seconds(12))
        let cache = HostCacheTests.cache(
            clock, HostCacheTests.configuration(.init(dualStack: .preferIPv4)) { $0.scoring = policy })
        let host = name("b.test")
        let (fast, slow) = (ip("192.0.2.1"), ip("192.0.2.2"))
        _ = cache.store(host, family: .any, addresses: [fast, slow], ttl: 3600, origin: .cares)
        cache.recordConnect(to: fast, of: host, latency: .milliseconds(1))
        cache.recordConnect(to: slow, of: host, latency: .milliseconds(500))
        #expect(cache.bestAddress(for: host) == fast)

        // A 1 ms penalty alone would keep the fast address first; the back-off puts it last.
        cache.recordFailure(to: fast, of: host)
        var ranked = cache.rankedAddresses(for: host)
        #expect(ranked.map(\.ip) == [slow, fast])
        #expect(ranked.last?.isBackingOff == true && ranked.last?.isProven == false)
        clock.advance(.seconds(4))
        #expect(cache.bestAddress(for: host) == slow, "still backing off after 4 s")
        clock.advance(.seconds(2))
        #expect(cache.bestAddress(for: host) == fast, "the 5 s back-off is over")

        // Two failures in a row: 10 s; three: capped at 12 s.
        cache.recordFailure(to: fast, of: host)
        clock.advance(.seconds(9))
        #expect(cache.bestAddress(for: host) == slow)
        clock.advance(.seconds(2))
        #expect(cache.bestAddress(for: host) == fast)
        cache.recordFailure(to: fast, of: host)
        clock.advance(.seconds(11))
        #expect(cache.bestAddress(for: host) == slow)
        clock.advance(.seconds(2))
        #expect(cache.bestAddress(for: host) == fast)

        // An answer (here a request's first byte) ends the back-off at once, and the count of failures in a row.
        cache.recordFailure(to: fast, of: host)
        #expect(cache.bestAddress(for: host) == slow)
        cache.recordFirstByte(to: fast, of: host, latency: .milliseconds(80))
        ranked = cache.rankedAddresses(for: host)
        #expect(ranked.first?.ip == fast && ranked.first?.isBackingOff == false)
        cache.recordFailure(to: fast, of: host)
        clock.advance(.seconds(6))
        #expect(cache.bestAddress(for: host) == fast, "after an answer the next back-off starts again at 5 s")
    }

    @Test("time to first byte is kept apart from connect times: it never moves the connect average")
    func firstByteApart() {
        let clock = ManualClock()
        let cache = HostCacheTests.cache(clock, .init(dualStack: .preferIPv4))
        let host = name("f.test")
        let (one, two) = (ip("192.0.2.1"), ip("192.0.2.2"))
        _ = cache.store(host, family: .any, addresses: [one, two], ttl: 3600, origin: .cares)
        cache.recordConnect(to: one, of: host, latency: .milliseconds(10))
        cache.recordConnect(to: two, of: host, latency: .milliseconds(20))
        // A slow server answer on the address that connects fastest does not make it look slow to connect to.
        for _ in 0..<10 { cache.recordFirstByte(to: one, of: host, latency: .milliseconds(900)) }
        let ranked = cache.rankedAddresses(for: host)
        #expect(ranked.map(\.ip) == [one, two])
        #expect(ranked.first?.latencyMilliseconds == 10)
        #expect((ranked.first?.firstByteMilliseconds ?? 0) > 800)
        #expect(ranked.first?.successes == 11)
    }

    @Test("override addresses are ranked by their scores, keep their TTL and origin, and appear in the cache listing")
    func overridesRanked() async throws {
        let overrides = HostOverrides(ttl: 120)
        let (first, second, third) = (ip("127.0.0.50"), ip("127.0.0.51"), ip("127.0.0.52"))
        overrides.set([first, second, third], for: try HostPattern("pinned.test"))
        let cache = HostCache(configuration: .init(dualStack: .preferIPv4))
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: cache, prober: nil)
        let host = name("pinned.test")
        let before = try await resolver.resolveRanked("pinned.test", port: 8080)
        #expect(before.addresses.map(\.ip) == [first, second, third], "unmeasured: the file's order")
        #expect(before.freshness == .override && before.origin == .override && before.ttl == 120)

        resolver.reportConnect(to: first, of: host, latency: .milliseconds(80))
        resolver.reportConnect(to: second, of: host, latency: .milliseconds(20))
        resolver.reportConnect(to: third, of: host, latency: .milliseconds(1))
        let after = try await resolver.resolveRanked("pinned.test")
        #expect(after.addresses.map(\.ip) == [third, second, first])
        #expect(after.addresses.map(\.rank) == [1, 2, 3])
        resolver.reportFailure(to: third, of: host)
        let afterFailure = try await resolver.resolveRanked(host)
        #expect(afterFailure.addresses.map(\.ip) == [second, first, third])
        #expect(afterFailure.addresses.last?.isBackingOff == true)

        let listed = try #require(cache.entries().first { $0.host == "pinned.test" && $0.origin == .override })
        #expect(listed.addresses.map(\.ip) == [second, first, third])
        // Feedback about an address the override does not name is still dropped.
        resolver.reportConnect(to: ip("127.0.0.99"), of: host, latency: .milliseconds(1))
        #expect(try await resolver.resolveRanked(host).addresses.count == 3)
        await resolver.shutdown()
    }

    @Test("override scores survive a save and a load")
    func overrideScoresPersist() async throws {
        let path = TemporaryFiles.path("scores.json")
        let overrides = HostOverrides()
        overrides.set([ip("127.0.0.50"), ip("127.0.0.51")], for: try HostPattern("pinned.test"))
        let cache = HostCache(configuration: .init(dualStack: .preferIPv4))
        let resolver = HostResolver(upstreams: [], overrides: overrides, cache: cache, prober: nil)
        _ = try await resolver.resolveRanked("pinned.test")
        resolver.reportConnect(to: ip("127.0.0.51"), of: name("pinned.test"), latency: .milliseconds(3))
        try cache.save(to: path)
        await resolver.shutdown()

        let reloaded = HostCache(configuration: .init(dualStack: .preferIPv4))
        #expect(reloaded.load(from: path).problem == nil)
        let again = HostResolver(upstreams: [], overrides: overrides, cache: reloaded, prober: nil)
        let answer = try await again.resolveRanked("pinned.test")
        #expect(answer.addresses.map(\.ip) == [ip("127.0.0.51"), ip("127.0.0.50")])
        #expect(answer.addresses.first?.latencyMilliseconds == 3)
        await again.shutdown()
    }

    @Test("override addresses are probed in the background on first use: a blackholed and a refused one go last")
    func overridesProbed() async throws {
        let live = try TCPListener(ip: "127.0.0.56")
        defer { live.close() }
        let blackhole = try BlackholeListener(ip: "127.0.0.57", port: live.port)
        defer { blackhole.close() }
        let refusing = try TCPListener(ip: "127.0.0.58", port: live.port, listening: false)
        defer { refusing.close() }
        let overrides = HostOverrides()
        overrides.set([ip("127.0.0.57"), ip("127.0.0.58"), ip("127.0.0.56")], for: try HostPattern("probe.test"))
        let resolver = HostResolver(
            // A back-off far longer than the test: a slow (sanitized, loaded) run must not see it expire.
            upstreams: [], overrides: overrides,
            cache: HostCache(
                configuration: HostCacheTests.configuration(.init(dualStack: .preferIPv4)) {
                    $0.scoring = .init(failureBackoff: .seconds(600), maximumFailureBackoff: .seconds(600))
                }),
            prober: TCPConnectProber(),
            // A generous timeout: on a loaded two-core CI machine a live loopback connect has taken longer than 300 ms.
            configuration: .parts(
                probing: .init(ports: [1], interval: .seconds(60), timeout: TestTiming.scaled(.seconds(2))))
        )
        let first = try await resolver.resolveRanked("probe.test", port: Int(live.port))
        #expect(first.best == ip("127.0.0.57"), "before probing: the file's order")
        await resolver.waitForBackgroundWork()
        let probed = try await resolver.resolveRanked("probe.test", port: Int(live.port))
        #expect(probed.best == ip("127.0.0.56"))
        #expect(probed.addresses.first?.isProven == true)
        #expect(Set(probed.addresses.dropFirst().map(\.ip)) == [ip("127.0.0.57"), ip("127.0.0.58")])
        #expect(probed.addresses.dropFirst().allSatisfy { $0.isBackingOff && $0.failures == 1 })
        await resolver.shutdown()
    }

    @Test("a connection race: the blackholed first address loses to the next one, and every outcome is reported")
    func race() async throws {
        let live = try TCPListener(ip: "127.0.0.59")
        defer { live.close() }
        let blackhole = try BlackholeListener(ip: "127.0.0.60", port: live.port)
        defer { blackhole.close() }
        let addresses = [ip("127.0.0.60"), ip("127.0.0.59")].enumerated().map { index, ip in
            RankedAddress(ip: ip, rank: index + 1, score: 250, latencyMilliseconds: nil, successes: 0, failures: 0)
        }
        let reports = EventRecorder()
        // The connect timeout is generous (a live loopback connect on a loaded CI machine once took over 500 ms); the
        // attempt delay, not the timeout, is what lets the live address win.
        let race = ConnectionRace(
            attemptDelay: .milliseconds(50), connectTimeout: TestTiming.scaled(.seconds(3)), prober: TCPConnectProber())
        let winner = await race.run(addresses, port: Int(live.port)) { ip, outcome in
            reports.add("\(ip) \(outcome.isSuccess)")
        }
        #expect(winner == ip("127.0.0.59"), "reports: \(reports.all)")
        // The loser keeps running to its own timeout and is reported too.
        for _ in 0..<Int(300 * TestTiming.scale) where reports.all.count < 2 {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(reports.all.sorted() == ["127.0.0.59 true", "127.0.0.60 false"])

        // A refused first attempt starts the next one at once; when all fail there is no winner.
        let refusing = try TCPListener(ip: "127.0.0.61", port: live.port, listening: false)
        defer { refusing.close() }
        let none = await race.run(
            [
                RankedAddress(
                    ip: ip("127.0.0.61"), rank: 1, score: 250, latencyMilliseconds: nil, successes: 0, failures: 0)
            ],
            port: Int(live.port)
        ) { _, _ in }
        #expect(none == nil)
    }

    @Test(
        "a race can keep its winner's connection: open until taken and closed, closed when dropped, and run() closes it"
    )
    func raceKeepsTheWinnersConnection() async throws {
        let live = try await LocalHTTPServer(host: "127.0.0.176") { _ in .text("ok") }
        try await withCleanup { () async throws in
            let race = ConnectionRace(
                attemptDelay: .milliseconds(50), connectTimeout: TestTiming.scaled(.seconds(3)),
                prober: TCPConnectProber())
            let addresses = [
                RankedAddress(
                    ip: ip("127.0.0.176"), rank: 1, score: 250, latencyMilliseconds: nil, successes: 0, failures: 0)
            ]
            let kept = await race.runKeepingWinner(addresses, port: live.port) { _, _ in }
            let connection = try #require(kept?.1)
            #expect(kept?.0 == ip("127.0.0.176") && connection.address == ip("127.0.0.176"))
            #expect(try await waitUntil { live.connections == 1 })
            try await Task.sleep(for: .milliseconds(50))
            #expect(live.closedConnections == 0, "the kept connection stays open")
            let channel = try #require(connection.take())
            #expect(channel.isActive)
            #expect(connection.take() == nil, "a connection is handed over once")
            connection.close()  // taken: closing is the taker's business
            #expect(channel.isActive)
            try await channel.close()
            #expect(try await waitUntil { live.closedConnections == 1 })

            // Dropped without being taken: closed.
            do { _ = await race.runKeepingWinner(addresses, port: live.port) { _, _ in } }
            #expect(try await waitUntil { live.connections == 2 && live.closedConnections == 2 })
            // run() reports the winner and closes its connection.
            #expect(await race.run(addresses, port: live.port) { _, _ in } == ip("127.0.0.176"))
            #expect(try await waitUntil { live.connections == 3 && live.closedConnections == 3 })
        } cleanup: {
            await live.stop()
        }
    }

    @Test("the race delay follows a measured connect time, within its bounds")
    func raceDelay() {
        let race = ConnectionRace(
            attemptDelay: .milliseconds(250), connectTimeout: .seconds(2), prober: TCPConnectProber())
        func address(_ latency: Double?, penalty: Double = 0) -> RankedAddress {
            RankedAddress(
                ip: ip("192.0.2.1"), rank: 1, score: 0, latencyMilliseconds: latency, successes: 1, failures: 0,
                penaltyMilliseconds: penalty)
        }
        #expect(race.delay(after: address(nil)) == .milliseconds(250))
        #expect(race.delay(after: address(30)) == .milliseconds(60))
        #expect(race.delay(after: address(1)) == .milliseconds(10))
        #expect(race.delay(after: address(400)) == .milliseconds(250))
        #expect(race.delay(after: address(30, penalty: 5000)) == .milliseconds(250))
    }
}

/// Events in the order they happened, from any thread.
final class EventRecorder: Sendable {
    private let events = Locked<[String]>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}
