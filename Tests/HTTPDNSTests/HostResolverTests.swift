import Foundation
import Logging
import MetricsTestKit
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

@Suite("Host resolver pipeline", .timeLimit(.minutes(1)))
struct HostResolverTests {
    static let zone: [String: [String]] = [
        "a.test": ["192.0.2.1", "192.0.2.2", "2001:db8::1"],
        "b.test": ["198.51.100.1"],
    ]

    static func resolver(
        _ upstreams: [FakeUpstream],
        clock: ManualClock = ManualClock(),
        cache: HostCache.Configuration? = HostCache.Configuration(minimumTTL: 0),
        overrides: HostOverrides? = nil,
        configuration: HostResolver.Configuration = .parts(probing: nil),
        metrics: TestMetrics? = nil
    ) -> HostResolver {
        HostResolver(
            upstreams: upstreams.enumerated().map { index, upstream in
                .init(
                    name: upstream.source.name, kind: upstream.source == .cares ? .cares : .httpDNS, resolver: upstream)
            },
            overrides: overrides,
            cache: cache.map { HostCache(configuration: $0, clock: clock.cacheClock) },
            prober: nil,
            configuration: configuration,
            metricsFactory: metrics
        )
    }

    @Test("overrides answer first, then the cache; an upstream answer is cached")
    func order() async throws {
        let upstream = FakeUpstream(.answer(Self.zone, ttl: 60))
        let overrides = HostOverrides()
        overrides.set([ip("203.0.113.9")], for: try HostPattern("b.test"))
        let resolver = Self.resolver([upstream], overrides: overrides)
        try await withCleanup { () async throws in
            let first = try await resolver.resolveRanked("a.test")
            #expect(first.freshness == .upstream)
            #expect(first.origin == .cares)
            #expect(Set(first.addresses.map(\.ip.description)) == Set(Self.zone["a.test"]!))
            let second = try await resolver.resolveRanked("a.test")
            #expect(second.freshness == .cache)
            #expect(second.addresses == first.addresses)
            #expect(upstream.calls == 1)

            let overridden = try await resolver.resolveRanked("b.test")
            #expect(overridden.freshness == .override)
            #expect(overridden.best == ip("203.0.113.9"))
            #expect(upstream.calls == 1)

            let literal = try await resolver.resolveRanked("192.0.2.77")
            #expect(literal.freshness == .local)
            #expect(try await resolver.resolve(name("a.test"), family: .any).addresses.count == 3)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("background refreshes are bounded by cache.maxRefreshesPerSecond; the rest are put off, and counted")
    func refreshRate() async throws {
        let names = (0..<10).map { "r\($0).test" }
        let zone = Dictionary(uniqueKeysWithValues: names.map { ($0, ["192.0.2.\(1 + names.firstIndex(of: $0)!)"]) })
        let upstream = FakeUpstream(.answer(zone, ttl: 30))
        let clock = ManualClock()
        let metrics = TestMetrics()
        let resolver = Self.resolver(
            [upstream], clock: clock, cache: HostCache.Configuration(minimumTTL: 0, maximumRefreshesPerSecond: 3),
            metrics: metrics)
        try await withCleanup { () async throws in
            for name in names { _ = try await resolver.resolveRanked(name) }
            #expect(upstream.calls == 10)
            // Every answer is now stale: serving each asks for a refresh, and only three start at once.
            clock.advance(.seconds(31))
            for name in names { #expect(try resolver.cachedRanked(name)?.freshness == .stale) }
            #expect(try await waitUntil { upstream.calls == 13 })
            try await Task.sleep(for: .milliseconds(100))
            #expect(upstream.calls == 13, "the other seven refreshes were put off")
            let postponed = try metrics.expectCounter("httpdns_cache_refreshes", [("outcome", "postponed")])
            #expect(postponed.totalValue == 7)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test(
        "cachedRanked answers without waiting from overrides, literals and the cache, and nil where an upstream must be asked"
    )
    func cachedRankedFastPath() async throws {
        let upstream = FakeUpstream(.answer(Self.zone, ttl: 60))
        let overrides = HostOverrides()
        overrides.set([ip("203.0.113.9")], for: try HostPattern("b.test"))
        let resolver = Self.resolver([upstream], overrides: overrides)
        try await withCleanup { () async throws in
            #expect(try resolver.cachedRanked("a.test") == nil)
            #expect(upstream.calls == 0)
            let fetched = try await resolver.resolveRanked("a.test")
            let cached = try #require(try resolver.cachedRanked("A.test", port: 443))
            #expect(cached.freshness == .cache)
            #expect(cached.addresses == fetched.addresses)
            #expect(try resolver.cachedRanked("b.test")?.freshness == .override)
            #expect(try resolver.cachedRanked("192.0.2.77")?.freshness == .local)
            #expect(throws: HTTPDNSError.self) { try resolver.cachedRanked("bad..name") }
            // A cached negative answer is left to the full path, which tries the next search candidate and the
            // fallback.
            upstream.set(.fail(.notFound))
            await #expect(throws: HTTPDNSError.self) { try await resolver.resolveRanked("c.test") }
            #expect(try resolver.cachedRanked("c.test") == nil)
            #expect(upstream.calls == 2)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("upstreams are asked in order; when all fail, NXDOMAIN wins over other errors")
    func fallThrough() async throws {
        let failing = FakeUpstream(.fail(.timeout), source: "doh-a")
        let working = FakeUpstream(.answer(Self.zone, ttl: 60))
        let resolver = Self.resolver([failing, working])
        try await withCleanup { () async throws in
            #expect(try await resolver.resolveRanked("a.test").origin == .cares)
            #expect(failing.calls == 1 && working.calls == 1)

            let both = Self.resolver([
                FakeUpstream(.fail(.timeout), source: "doh-a"), FakeUpstream(.answer([:], ttl: 60)),
            ])
            try await withCleanup { () async throws in
                await expectDNSError(.notFound) { try await both.resolve("a.test") }
                let none = Self.resolver([FakeUpstream(.fail(.timeout)), FakeUpstream(.fail(.serverFailure))])
                try await withCleanup { () async throws in
                    await expectDNSError(.timeout) { try await none.resolve("a.test") }
                } cleanup: {
                    await none.shutdown()
                }
            } cleanup: {
                await both.shutdown()
            }
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("10,000 concurrent resolves of one uncached host cause exactly one upstream query", arguments: [true, false])
    func singleFlight(withCache: Bool) async throws {
        let upstream = FakeUpstream(.answer(Self.zone, ttl: 60))
        upstream.hold()
        let resolver = Self.resolver([upstream], cache: withCache ? .init(minimumTTL: 0) : nil)
        try await withCleanup { () async throws in
            let callers = 10_000
            try await withThrowingTaskGroup(of: IPAddress?.self) { group in
                for _ in 0..<callers {
                    group.addTask { try await resolver.resolveRanked("a.test").best }
                }
                // Every caller joins the one query before it is answered.
                await eventually { resolver.waitingCallers == callers && upstream.waiting == 1 }
                #expect(upstream.calls == 1)
                upstream.release()
                var answers = 0
                for try await best in group {
                    #expect(best == ip("192.0.2.1"))
                    answers += 1
                }
                #expect(answers == callers)
            }
            #expect(upstream.calls == 1)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("a cancelled caller stops waiting without failing the others; a cancelled leader's query is asked again")
    func cancellation() async throws {
        let upstream = FakeUpstream(.answer(Self.zone, ttl: 60))
        upstream.hold()
        let resolver = Self.resolver([upstream])
        try await withCleanup { () async throws in
            // A caller who joined the query leaves: the query goes on for the one who asked it.
            let patient = Task { try await resolver.resolveRanked("a.test") }
            await eventually { upstream.waiting == 1 }
            let cancelled = Task { try await resolver.resolveRanked("a.test") }
            await eventually { resolver.waitingCallers == 2 }
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await cancelled.value }
            upstream.release()
            #expect(try await patient.value.best == ip("192.0.2.1"))
            #expect(upstream.calls == 1)
            // The caller who asked leaves: its query is cancelled with it, and asked again for the one who joined.
            upstream.hold()
            let leader = Task { try await resolver.resolveRanked("b.test") }
            await eventually { upstream.waiting == 1 }
            let joined = Task { try await resolver.resolveRanked("b.test") }
            await eventually { resolver.waitingCallers == 2 }
            leader.cancel()
            await #expect(throws: CancellationError.self) { _ = try await leader.value }
            await eventually { upstream.calls == 3 && upstream.waiting == 1 }
            upstream.release()
            #expect(try await joined.value.best == ip("198.51.100.1"))
            #expect(upstream.calls == 3)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test(
        "the first caller runs the flight; a cancelled leader's run starts again for the others; a flight nobody waits for any more is cancelled and forgotten; a background refresh runs on"
    )
    func abandonedFlight() async throws {
        let tasks = BackgroundTasks()
        let flights = SingleFlight<String, Int>(tasks: tasks)
        let started = Locked(0)
        let cancelled = Locked(0)
        let operation: @Sendable () async throws -> Int = {
            started.withLock { $0 += 1 }
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                cancelled.withLock { $0 += 1 }
                throw error
            }
            return 1
        }
        // The first caller leads; the second joins. The leader leaves: its run stops and starts again for the other.
        let first = Task { try await flights.run("k", operation) }
        await eventually { started.withLock { $0 } == 1 && flights.waiting == 1 }
        let second = Task { try await flights.run("k", operation) }
        await eventually { flights.waiting == 2 }
        first.cancel()
        await #expect(throws: CancellationError.self) { _ = try await first.value }
        await eventually { started.withLock { $0 } == 2 }
        #expect(cancelled.withLock { $0 } == 1 && flights.inFlight == 1)
        // A caller joins and leaves: the flight goes on for the other.
        let third = Task { try await flights.run("k", operation) }
        await eventually { flights.waiting == 2 }
        third.cancel()
        await #expect(throws: CancellationError.self) { _ = try await third.value }
        try await Task.sleep(for: .milliseconds(100))
        #expect(cancelled.withLock { $0 } == 1 && flights.inFlight == 1 && started.withLock { $0 } == 2)
        // The last one leaves: the work is cancelled and the flight forgotten.
        second.cancel()
        await #expect(throws: CancellationError.self) { _ = try await second.value }
        await eventually { cancelled.withLock { $0 } == 2 }
        #expect(flights.inFlight == 0)
        // The next caller starts a new flight, and gets its result; so does one that finds it failed.
        #expect(try await flights.run("k") { 7 } == 7)
        await #expect(throws: CancellationError.self) { try await flights.run("k") { throw CancellationError() } }
        #expect(flights.inFlight == 0 && flights.waiting == 0)
        // A background refresh is not a caller's: one who joins and leaves does not stop it.
        flights.launchIfIdle("refresh", operation)
        let joiner = Task { try await flights.run("refresh", operation) }
        await eventually { flights.waiting == 1 && started.withLock { $0 } == 3 }
        joiner.cancel()
        await #expect(throws: CancellationError.self) { _ = try await joiner.value }
        try await Task.sleep(for: .milliseconds(100))
        #expect(cancelled.withLock { $0 } == 2 && flights.inFlight == 1)
        await tasks.shutdown()
    }

    @Test("an expired answer is served at once while one background refresh runs")
    func staleWhileRevalidate() async throws {
        let clock = ManualClock()
        let upstream = FakeUpstream(.answer(["a.test": ["192.0.2.1"]], ttl: 10))
        let resolver = Self.resolver([upstream], clock: clock)
        try await withCleanup { () async throws in
            _ = try await resolver.resolveRanked("a.test")
            clock.advance(.seconds(11))
            upstream.set(.answer(["a.test": ["192.0.2.99"]], ttl: 10))
            upstream.hold()
            let stale = try await resolver.resolveRanked("a.test")
            #expect(stale.freshness == .stale)
            #expect(stale.best == ip("192.0.2.1"))
            let again = try await resolver.resolveRanked("a.test")
            #expect(again.isStale, "still refreshing")
            await eventually { upstream.waiting == 1 }
            #expect(upstream.calls == 2, "one refresh for both stale hits")
            upstream.release()
            await resolver.waitForBackgroundWork()
            let fresh = try await resolver.resolveRanked("a.test")
            #expect(fresh.freshness == .cache)
            #expect(fresh.best == ip("192.0.2.99"))
            #expect(upstream.calls == 2)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("when every upstream fails, the stale answer is served instead of an error")
    func staleOnFailure() async throws {
        let clock = ManualClock()
        let upstream = FakeUpstream(.answer(["a.test": ["192.0.2.1"]], ttl: 10))
        let metrics = TestMetrics()
        let resolver = Self.resolver(
            [upstream], clock: clock, cache: .init(minimumTTL: 0, maximumStaleness: .seconds(100)), metrics: metrics
        )
        try await withCleanup { () async throws in
            _ = try await resolver.resolveRanked("a.test")
            upstream.set(.fail(.timeout))
            clock.advance(.seconds(11))
            #expect(try await resolver.resolveRanked("a.test").isStale)
            await resolver.waitForBackgroundWork()
            #expect(
                try await resolver.resolveRanked("a.test").best == ip("192.0.2.1"), "the failed refresh kept the answer"
            )
            #expect(try metrics.expectCounter("httpdns_cache_stale_serves").totalValue == 2)
            #expect(try metrics.expectCounter("httpdns_cache_misses").totalValue == 1)
            #expect(
                try metrics.expectTimer("httpdns_upstream_duration", [("source", "cares"), ("outcome", "failure")])
                    .values.count == 1)
            await expectDNSError(.timeout) { try await resolver.resolve("b.test") }
            clock.advance(.seconds(100))
            await expectDNSError(.timeout) { try await resolver.resolve("a.test") }
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("NXDOMAIN is cached negatively: the second lookup asks no upstream")
    func negativeCache() async throws {
        let clock = ManualClock()
        let upstream = FakeUpstream(.answer([:], ttl: 60))
        let metrics = TestMetrics()
        let resolver = Self.resolver([upstream], clock: clock, cache: .init(negativeTTL: 5), metrics: metrics)
        try await withCleanup { () async throws in
            await expectDNSError(.notFound) { try await resolver.resolve("gone.test") }
            await expectDNSError(.notFound) { try await resolver.resolve("gone.test") }
            #expect(upstream.calls == 1)
            #expect(try metrics.expectCounter("httpdns_cache_negative_hits").totalValue == 1)
            clock.advance(.seconds(6))
            await expectDNSError(.notFound) { try await resolver.resolve("gone.test") }
            #expect(upstream.calls == 2)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("race mode: the faster source wins; the slower, trusted HTTP DNS answer then takes its place in the cache")
    func race() async throws {
        let slow = FakeUpstream(.answer(["a.test": ["192.0.2.50"]], ttl: 60), source: "doh-slow")
        let fast = FakeUpstream(.answer(["a.test": ["192.0.2.1"]], ttl: 60))
        slow.hold()
        let resolver = Self.resolver([slow, fast], configuration: .parts(race: true, probing: nil))
        try await withCleanup { () async throws in
            let answer = try await resolver.resolveRanked("a.test")
            #expect(answer.origin == .cares)
            #expect(answer.addresses.map(\.ip) == [ip("192.0.2.1")])
            slow.release()
            await resolver.waitForBackgroundWork()
            // c-ares is not trusted by default: its address does not join the HTTP DNS answer (RaceTrustTests).
            let replaced = try await resolver.resolveRanked("a.test")
            #expect(replaced.addresses.map(\.ip) == [ip("192.0.2.50")] && replaced.origin == "doh-slow")
            #expect(slow.calls == 1 && fast.calls == 1)

            let failingFast = FakeUpstream(.fail(.refused))
            let slowGood = FakeUpstream(.answer(["a.test": ["192.0.2.50"]], ttl: 60), source: "doh-slow")
            let second = Self.resolver([slowGood, failingFast], configuration: .parts(race: true, probing: nil))
            try await withCleanup { () async throws in
                #expect(
                    try await second.resolveRanked("a.test").origin == "doh-slow", "a failure does not win the race")
            } cleanup: {
                await second.shutdown()
            }
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("pre-resolved hosts are cached before the first request")
    func preResolve() async throws {
        let upstream = FakeUpstream(.answer(Self.zone, ttl: 60))
        let resolver = Self.resolver(
            [upstream], configuration: .parts(probing: nil, preResolve: ["a.test", "b.test", "gone.test"]))
        try await withCleanup { () async throws in
            await resolver.waitForBackgroundWork()
            #expect(upstream.calls == 3)
            #expect(try await resolver.resolveRanked("a.test").freshness == .cache)
            #expect(try await resolver.resolveRanked("b.test").freshness == .cache)
            #expect(upstream.calls == 3)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("after a restart the persisted cache answers without any upstream")
    func restart() async throws {
        let path = TemporaryFiles.path("cache.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = HostResolver.Configuration.parts(probing: nil, cachePath: path)
        let first = Self.resolver([FakeUpstream(.answer(Self.zone, ttl: 300))], configuration: configuration)
        _ = try await first.resolveRanked("a.test")
        first.reportConnect(to: ip("2001:db8::1"), of: name("a.test"), latency: .milliseconds(2))
        await first.shutdown()

        let down = FakeUpstream(.fail(.timeout))
        let second = Self.resolver([down], configuration: configuration)
        try await withCleanup { () async throws in
            let answer = try await second.resolveRanked("a.test")
            #expect(answer.freshness == .cache)
            #expect(answer.best == ip("2001:db8::1"), "the measured address is still best")
            #expect(down.calls == 0)
        } cleanup: {
            await second.shutdown()
        }
    }

    @Test("passive feedback reorders the ranked list; a network change makes answers stale")
    func feedbackAndNetworkChange() async throws {
        let upstream = FakeUpstream(.answer(Self.zone, ttl: 60))
        let resolver = Self.resolver([upstream])
        try await withCleanup { () async throws in
            _ = try await resolver.resolveRanked("a.test")
            resolver.reportFailure(to: ip("192.0.2.1"), of: name("a.test"))
            let ranked = try await resolver.resolveRanked("a.test")
            #expect(ranked.addresses.last?.ip == ip("192.0.2.1"))
            #expect(ranked.best != ip("192.0.2.1"))
            resolver.networkDidChange()
            #expect(try await resolver.resolveRanked("a.test").isStale)
            await resolver.waitForBackgroundWork()
            #expect(upstream.calls == 2)
            #expect(try await resolver.resolveRanked("a.test").freshness == .cache)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("with only the cache, a miss is notCached")
    func cacheOnly() async throws {
        let resolver = Self.resolver([])
        try await withCleanup { () async throws in
            await expectDNSError(.notCached) { try await resolver.resolve("a.test") }
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("background probes rank live addresses above a closed one (real TCP on 127.0.0.x)")
    func probes() async throws {
        let live2 = try TCPListener(ip: "127.0.0.2")
        defer { live2.close() }
        let live3 = try TCPListener(ip: "127.0.0.3", port: live2.port)
        defer { live3.close() }
        // 127.0.0.4 holds the port bound but not listening: its connect is refused.
        let refusing = try TCPListener(ip: "127.0.0.4", port: live2.port, listening: false)
        defer { refusing.close() }
        let upstream = FakeUpstream(.answer(["svc.test": ["127.0.0.4", "127.0.0.2", "127.0.0.3"]], ttl: 300))
        let metrics = TestMetrics()
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
            cache: HostCache(configuration: .init(dualStack: .preferIPv4)),
            prober: TCPConnectProber(),
            configuration: .parts(
                probing: .init(ports: [Int(live2.port)], interval: .seconds(60), timeout: .seconds(30))),
            metricsFactory: metrics
        )
        try await withCleanup { () async throws in
            let first = try await resolver.resolveRanked("svc.test")
            #expect(first.best == ip("127.0.0.4"), "before probing: the source's order")
            await resolver.waitForBackgroundWork()
            let probed = try await resolver.resolveRanked("svc.test")
            #expect(probed.addresses.last?.ip == ip("127.0.0.4"))
            #expect(probed.addresses.last?.failures == 1)
            #expect(Set(probed.addresses.prefix(2).map(\.ip)) == [ip("127.0.0.2"), ip("127.0.0.3")])
            #expect(probed.addresses.prefix(2).allSatisfy { $0.latencyMilliseconds != nil && $0.successes == 1 })
            #expect(try metrics.expectCounter("httpdns_probes", [("outcome", "connected")]).totalValue == 2)
            #expect(try metrics.expectCounter("httpdns_probes", [("outcome", "failed")]).totalValue == 1)
            _ = try await resolver.resolveRanked("svc.test")
            await resolver.waitForBackgroundWork()
            #expect(
                try metrics.expectCounter("httpdns_probes", [("outcome", "connected")]).totalValue == 2, "rate-limited")
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("the first probe of a newly cached host uses the port the caller connects to, not probe.ports")
    func firstProbeUsesCallerPort() async throws {
        let live = try TCPListener(ip: "127.0.0.6")
        defer { live.close() }
        let refusing = try TCPListener(ip: "127.0.0.6", listening: false)
        defer { refusing.close() }
        let closedPort = Int(refusing.port)
        let upstream = FakeUpstream(.answer(["port.test": ["127.0.0.6"]], ttl: 300))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
            cache: HostCache(),
            prober: TCPConnectProber(),
            configuration: .parts(probing: .init(ports: [closedPort], interval: .seconds(60), timeout: .seconds(30)))
        )
        try await withCleanup { () async throws in
            _ = try await resolver.resolveRanked("port.test", family: .ipv4, port: Int(live.port))
            await resolver.waitForBackgroundWork()
            let probed = try await resolver.resolveRanked("port.test", family: .ipv4)
            #expect(probed.addresses.first?.successes == 1)
            #expect(probed.addresses.first?.failures == 0)
        } cleanup: {
            await resolver.shutdown()
        }
    }

    @Test("the TCP prober reports connects and refusals")
    func prober() async throws {
        // 127.0.0.30 is used by no other test. The refused port is held bound but not listening for the whole
        // check: a listener closed for the purpose would free its port for whatever a parallel test binds next.
        let listener = try TCPListener(ip: "127.0.0.30")
        defer { listener.close() }
        let closed = try TCPListener(ip: "127.0.0.30", listening: false)
        defer { closed.close() }
        let prober = TCPConnectProber()
        // Generous timeouts: on a loaded machine a connect can wait long for its event loop, and a timeout here
        // would only hide what the test checks (a loopback connect is accepted or refused at once).
        let connected = await prober.probe(ip("127.0.0.30"), port: Int(listener.port), timeout: .seconds(30))
        #expect(connected.isSuccess)
        let refused = await prober.probe(ip("127.0.0.30"), port: Int(closed.port), timeout: .seconds(30))
        #expect(refused == .failed(.connectionFailed))
        #expect(await prober.probe(ip("127.0.0.30"), port: 0, timeout: .seconds(1)) == .failed(.badQuery))
    }

    @Test("the settings build the pipeline: overrides file, cache, c-ares against dnsmasq")
    func fromSettings() async throws {
        let hosts = TemporaryFiles.path("hosts")
        let cachePath = TemporaryFiles.path("cache.json")
        defer {
            try? FileManager.default.removeItem(atPath: hosts)
            try? FileManager.default.removeItem(atPath: cachePath)
        }
        try "192.0.2.200 pinned.test\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        try await DNSMasq.with { server in
            var settings = HostResolver.Configuration.default
            settings.files.overridesFile = hosts
            settings.cares.servers = [server.address]
            settings.cachePath = cachePath
            settings.probeEnabled = false
            let resolver = try HostResolver(configuration: settings)
            #expect(try await resolver.resolveRanked("pinned.test").freshness == .override)
            #expect(try await resolver.resolveRanked("multi.test", family: .ipv4).origin == .cares)
            #expect(try await resolver.resolveRanked("multi.test", family: .ipv4).freshness == .cache)
            await resolver.shutdown()
            #expect(FileManager.default.fileExists(atPath: cachePath))
        }
    }
}
