import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// Clock steps: while running, expiry follows the monotonic clock only; across a save and a load, the boot clock
/// measures the time between them in one boot, and after a restart a file written "in the future" loads stale.
/// No entry becomes immortal and none dies early, whichever way the wall clock is stepped.
@Suite("Clock steps")
struct ClockStepTests {
    static let day = 86_400.0

    /// A cache holding `a.test` (TTL 300) and `b.test` (TTL 3600), saved to a temporary file after `age` seconds.
    static func saved(_ clock: ManualClock, age: Duration = .seconds(100)) throws -> String {
        let cache = HostCacheTests.cache(clock, .init(maximumStaleness: .seconds(600)))
        cache.store(name("a.test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 300, origin: .cares)
        cache.store(name("b.test"), family: .any, addresses: [ip("192.0.2.2")], ttl: 3600, origin: .cares)
        clock.advance(age)
        let path = TemporaryFiles.path("cache.json")
        try cache.save(to: path)
        return path
    }

    /// What a new process (a new cache on `clock`) sees of `host` after loading `path`.
    static func loaded(_ path: String, _ clock: ManualClock, _ host: String) -> (RankedResolution.Freshness, UInt32)? {
        let cache = HostCacheTests.cache(clock, .init(maximumStaleness: .seconds(600)))
        cache.load(from: path)
        guard case .hit(let answer, _, _, _) = cache.lookup(name(host), family: .any) else { return nil }
        return (answer.freshness, answer.ttl)
    }

    @Test("running: stepping the wall clock a day either way changes no expiry", arguments: [day, -day])
    func runningStep(step: Double) throws {
        let clock = ManualClock()
        let cache = HostCacheTests.cache(clock, .init(maximumStaleness: .seconds(60)))
        cache.store(name("a.test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 300, origin: .cares)
        clock.stepWall(by: step)
        clock.advance(.seconds(299))
        guard case .hit(let fresh, _, _, _) = cache.lookup(name("a.test"), family: .any) else {
            Issue.record("a wall-clock step of \(step) s killed a fresh answer")
            return
        }
        #expect(fresh.freshness == .cache && fresh.ttl == 1)
        clock.advance(.seconds(2))
        guard case .hit(let stale, _, _, _) = cache.lookup(name("a.test"), family: .any) else {
            Issue.record("expected a stale hit")
            return
        }
        #expect(stale.freshness == .stale, "a wall-clock step of \(step) s made an answer immortal")
        clock.advance(.seconds(60))
        #expect(cache.lookup(name("a.test"), family: .any).isMiss)
    }

    @Test(
        "same boot: a step of the wall clock between save and load changes nothing; the boot clock counts",
        arguments: [day, -day, 3 * 365 * day])
    func sameBootStep(step: Double) throws {
        let clock = ManualClock()
        let path = try Self.saved(clock)
        clock.stepWall(by: step)
        clock.advance(.seconds(50))
        // 300 s TTL, 100 s before the save, 50 s after: 150 s left, not dead (forward step), not 300+ (back).
        let a = Self.loaded(path, clock, "a.test")
        #expect(a?.0 == .cache && a?.1 == 150, "\(String(describing: a))")
        #expect(Self.loaded(path, clock, "b.test")?.1 == 3450)
        clock.advance(.seconds(151))
        #expect(Self.loaded(path, clock, "a.test")?.0 == .stale, "a step never makes a loaded answer immortal")
    }

    @Test("after a restart, a file written in the future (the clock was stepped back) loads stale, never fresh")
    func futureFile() throws {
        let clock = ManualClock()
        let path = try Self.saved(clock)
        clock.reboot()
        clock.stepWall(by: -Self.day)
        let a = Self.loaded(path, clock, "a.test")
        #expect(a?.0 == .stale && a?.1 == 0, "\(String(describing: a))")
        #expect(Self.loaded(path, clock, "b.test")?.0 == .stale)
        // A small difference between the writer's clock and ours is not "the future".
        let near = try Self.saved(clock)
        clock.reboot()
        clock.stepWall(by: -30)
        #expect(Self.loaded(near, clock, "a.test")?.0 == .cache)
    }

    @Test("after a restart the wall clock is all there is: elapsed time counts, and past the staleness limit is gone")
    func restart() throws {
        let clock = ManualClock()
        let path = try Self.saved(clock)
        clock.reboot()
        clock.advance(.seconds(60))
        #expect(Self.loaded(path, clock, "a.test")?.1 == 140)
        clock.advance(.seconds(3600))
        #expect(Self.loaded(path, clock, "a.test") == nil, "past the staleness limit")
        #expect(Self.loaded(path, clock, "b.test")?.0 == .stale)
    }

    @Test("the file records the boot and its clock; a file of an older release (without them) still loads")
    func fileFields() throws {
        let clock = ManualClock()
        let path = try Self.saved(clock)
        let file = try CacheFile.read(from: path)
        #expect(file.bootID == "boot-1" && file.bootSeconds == clock.cacheClock.bootSeconds())
        var old = file
        old.bootID = nil
        old.bootSeconds = nil
        try old.write(to: path)
        clock.advance(.seconds(20))
        #expect(Self.loaded(path, clock, "a.test")?.1 == 180)
    }

    @Test("the system clock reads the boot id and a boot clock at least as far as the monotonic one")
    func systemClock() {
        let clock = CacheClock.system
        #expect(clock.bootID?.count == 36)
        let monotonic = Double(TimeSpecWords.now(CLOCK_MONOTONIC).totalNanoseconds) / 1e9
        #expect(clock.bootSeconds() >= monotonic - 0.1)
        // The cache's reading follows the boot clock (suspended time included), within the coarse clock's tick.
        let reading = Double(clock.monotonicNanoseconds()) / 1e9
        #expect(abs(reading - clock.bootSeconds()) < 0.1)
    }
}
