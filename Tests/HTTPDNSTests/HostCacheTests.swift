import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

@Suite("Scored IP cache")
struct HostCacheTests {
    static func cache(_ clock: ManualClock, _ configuration: HostCache.Configuration = .init()) -> HostCache {
        HostCache(configuration: configuration, clock: clock.cacheClock)
    }

    /// `base` with the tuning an adopter does not set (scoring, refresh timing) changed by `change`.
    static func configuration(
        _ base: HostCache.Configuration = .init(), _ change: (inout HostCache.Configuration) -> Void
    ) -> HostCache.Configuration {
        var configuration = base
        change(&configuration)
        return configuration
    }

    @Test("TTLs are clamped; answers are fresh, then stale up to the maximum staleness, then gone")
    func expiry() throws {
        let clock = ManualClock()
        let cache = Self.cache(clock, .init(minimumTTL: 10, maximumTTL: 100, maximumStaleness: .seconds(50)))
        let stored = cache.store(name("a.test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 5, origin: .cares)
        #expect(stored?.ttl == 10, "raised to the minimum")
        #expect(
            cache.store(name("b.test"), family: .any, addresses: [ip("192.0.2.2")], ttl: 1000, origin: .cares)?.ttl
                == 100)
        #expect(cache.store(name("empty.test"), family: .any, addresses: [], ttl: 60, origin: .cares) == nil)
        #expect(cache.lookup(name("empty.test"), family: .any).isMiss, "an empty answer is not stored")

        clock.advance(.seconds(9))
        guard case .hit(let fresh, _, _, _) = cache.lookup(name("a.test"), family: .any) else {
            Issue.record("expected a fresh hit")
            return
        }
        #expect(fresh.freshness == .cache)
        #expect(fresh.ttl == 1)
        #expect(cache.bestAddress(for: name("a.test")) == ip("192.0.2.1"))

        clock.advance(.seconds(2))
        guard case .hit(let stale, _, _, _) = cache.lookup(name("a.test"), family: .any) else {
            Issue.record("expected a stale hit")
            return
        }
        #expect(stale.freshness == .stale)
        #expect(stale.ttl == 0)
        #expect(stale.staleSeconds == 1)
        #expect(cache.bestAddress(for: name("a.test")) == nil, "the fast path serves fresh answers only")

        clock.advance(.seconds(50))
        guard case .miss = cache.lookup(name("a.test"), family: .any) else {
            Issue.record("expected a miss past the maximum staleness")
            return
        }
        #expect(cache.lookup(name("c.test"), family: .any).isMiss)
        #expect(cache.lookup(name("b.test"), family: .ipv4).isMiss, "families are cached separately")
    }

    @Test("a stale answer claims one refresh; a failed refresh blocks the next for the retry interval")
    func refreshClaims() {
        let clock = ManualClock()
        let cache = Self.cache(
            clock, Self.configuration(.init(minimumTTL: 0)) { $0.refreshRetryInterval = .seconds(5) })
        cache.store(name("a.test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 10, origin: .cares)
        clock.advance(.seconds(11))
        #expect(cache.lookup(name("a.test"), family: .any).refresh == true)
        #expect(cache.lookup(name("a.test"), family: .any).refresh == false, "one refresh at a time")
        cache.refreshFailed(name("a.test"), family: .any)
        clock.advance(.seconds(4))
        #expect(cache.lookup(name("a.test"), family: .any).refresh == false)
        clock.advance(.seconds(2))
        #expect(cache.lookup(name("a.test"), family: .any).refresh == true)
    }

    @Test("hot answers are refreshed shortly before they expire; cold ones are not")
    func hotRefresh() {
        let clock = ManualClock()
        let cache = Self.cache(clock, Self.configuration(.init(minimumTTL: 0)) { $0.hotHits = 2 })
        cache.store(name("hot.test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 100, origin: .cares)
        cache.store(name("cold.test"), family: .any, addresses: [ip("192.0.2.2")], ttl: 100, origin: .cares)
        #expect(cache.lookup(name("hot.test"), family: .any).refresh == false, "early and not yet hot")
        clock.advance(.seconds(91))
        #expect(cache.lookup(name("cold.test"), family: .any).refresh == false, "one hit is not hot")
        #expect(cache.lookup(name("hot.test"), family: .any).refresh == true, "second hit, inside the last tenth")
        #expect(cache.lookup(name("hot.test"), family: .any).refresh == false, "claimed once")
    }

    @Test("NXDOMAIN and no data are cached for the negative TTL; other errors are not")
    func negative() {
        let clock = ManualClock()
        let cache = Self.cache(clock, .init(negativeTTL: 30))
        cache.storeNegative(name("gone.test"), family: .any, error: HTTPDNSError(code: .notFound, message: "nx"))
        cache.storeNegative(name("v4.test"), family: .ipv6, error: HTTPDNSError(code: .noData, message: "nodata"))
        cache.storeNegative(
            name("down.test"), family: .any, error: HTTPDNSError(code: .serverFailure, message: "servfail"))
        #expect(cache.lookup(name("gone.test"), family: .any).negativeCode == .notFound)
        #expect(cache.lookup(name("v4.test"), family: .ipv6).negativeCode == .noData)
        #expect(cache.lookup(name("down.test"), family: .any).isMiss)
        clock.advance(.seconds(31))
        #expect(cache.lookup(name("gone.test"), family: .any).isMiss)
        let off = Self.cache(clock, .init(negativeTTL: 0))
        off.storeNegative(name("gone.test"), family: .any, error: HTTPDNSError(code: .notFound, message: "nx"))
        #expect(off.lookup(name("gone.test"), family: .any).isMiss)
    }

    @Test("the least recently used host is evicted when the cache is full")
    func lru() {
        let clock = ManualClock()
        let cache = Self.cache(clock, .init(maximumHosts: 3))
        for host in ["a.test", "b.test", "c.test"] {
            cache.store(name(host), family: .any, addresses: [ip("192.0.2.1")], ttl: 60, origin: .cares)
        }
        _ = cache.lookup(name("a.test"), family: .any)
        cache.store(name("d.test"), family: .any, addresses: [ip("192.0.2.4")], ttl: 60, origin: .cares)
        #expect(cache.count == 3)
        #expect(cache.lookup(name("b.test"), family: .any).isMiss, "b was used least recently")
        #expect(!cache.lookup(name("a.test"), family: .any).isMiss)
        #expect(!cache.lookup(name("c.test"), family: .any).isMiss)
        #expect(!cache.lookup(name("d.test"), family: .any).isMiss)

        let big = Self.cache(clock, .init(maximumHosts: 1000))
        for index in 0..<5000 {
            big.store(name("h\(index).test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 60, origin: .cares)
            #expect(big.count <= 1000)
            // A host used now and then stays, however many are stored after it.
            if index % 100 == 0 { _ = big.lookup(name("h0.test"), family: .any) }
        }
        #expect(!big.lookup(name("h4999.test"), family: .any).isMiss)
        #expect(!big.lookup(name("h0.test"), family: .any).isMiss, "used recently, yet evicted")
        #expect(big.lookup(name("h1.test"), family: .any).isMiss, "the least recently used stayed")
    }

    @Test(
        "eviction order: stored again or used, a host gets one second chance and keeps its one place; the queue stays bounded"
    )
    func evictionOrder() throws {
        var core = HostCacheCore(configuration: .init(maximumHosts: 4))
        let now = CacheInstant(nanoseconds: 1_000_000_000)
        func store(_ host: String) throws {
            _ = core.store(
                try HostName(host), family: .any, addresses: [ip("192.0.2.1")], ttl: 60, origin: .cares, now: now)
        }
        func cached() -> Set<String> { Set(core.records.keys.map(\.name)) }
        for host in ["a.test", "b.test", "c.test", "d.test"] { try store(host) }
        // Stored again, b counts as used (its place stays); used, c too: each gets one pass.
        try store("b.test")
        _ = core.lookup(try HostName("c.test"), family: .any, now: now)
        try store("e.test")
        #expect(cached() == ["b.test", "c.test", "d.test", "e.test"], "a was the oldest")
        try store("f.test")
        #expect(cached() == ["b.test", "c.test", "e.test", "f.test"], "c was passed over once, d went")
        try store("g.test")
        #expect(cached() == ["b.test", "c.test", "f.test", "g.test"], "then e: b and c were passed over once")
        try store("h.test")
        #expect(cached() == ["c.test", "f.test", "g.test", "h.test"], "then b, its second chance spent")
        try store("i.test")
        #expect(cached() == ["f.test", "g.test", "h.test", "i.test"], "then c")
        // The same host stored over and over keeps its one place: nothing piles up to be rebuilt under the lock.
        for _ in 0..<10_000 { try store("i.test") }
        #expect(core.order.count == 4)
        #expect(core.order.count <= 2 * core.count + 64)
        core.removeAll()
        #expect(core.order.isEmpty && core.count == 0)
    }

    @Test("measured latency ranks addresses; a failure drops one until its penalty decays")
    func scoring() {
        let clock = ManualClock()
        let cache = Self.cache(
            clock,
            Self.configuration(.init(dualStack: .preferIPv4)) { $0.scoring = .init(penaltyHalfLife: .seconds(10)) })
        let host = name("a.test")
        let (one, two, three) = (ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.3"))
        let stored = cache.store(host, family: .any, addresses: [one, two, three], ttl: 300, origin: .cares)
        #expect(stored?.addresses.map(\.ip) == [one, two, three], "unmeasured: the source's order")
        #expect(stored?.addresses.map(\.rank) == [1, 2, 3])

        cache.recordConnect(to: one, of: host, latency: .milliseconds(40))
        cache.recordConnect(to: two, of: host, latency: .milliseconds(5))
        cache.recordConnect(to: three, of: host, latency: .milliseconds(20))
        #expect(cache.rankedAddresses(for: host).map(\.ip) == [two, three, one])
        #expect(cache.bestAddress(for: host) == two)

        cache.recordFailure(to: two, of: host)
        let afterFailure = cache.rankedAddresses(for: host)
        #expect(afterFailure.last?.ip == two)
        #expect(afterFailure.last?.failures == 1)
        #expect(cache.bestAddress(for: host) == three)

        clock.advance(.seconds(200))
        #expect(cache.bestAddress(for: host) == two, "the penalty decayed; the fast address is back")

        cache.recordConnect(to: one, of: host, latency: .milliseconds(1))
        let ranked = cache.rankedAddresses(for: host)
        #expect(ranked.first?.ip == two, "one sample moves the average only part of the way")
        #expect((ranked.first { $0.ip == one }?.latencyMilliseconds ?? 0) < 40)

        cache.recordConnect(to: ip("198.51.100.1"), of: host, latency: .milliseconds(1))
        #expect(
            !cache.rankedAddresses(for: host).contains { $0.ip == ip("198.51.100.1") },
            "feedback for foreign IPs is ignored")
    }

    @Test(
        "dual-stack policies order the families",
        arguments: [
            (DualStackPolicy.preferIPv4, ["192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"]),
            (.preferIPv6, ["2001:db8::1", "2001:db8::2", "192.0.2.1", "192.0.2.2"]),
            (.fastest, ["192.0.2.1", "2001:db8::1", "192.0.2.2", "2001:db8::2"]),
        ])
    func dualStack(policy: DualStackPolicy, expected: [String]) {
        let cache = Self.cache(ManualClock(), .init(dualStack: policy))
        let addresses = ["192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"].map(ip)
        let stored = cache.store(name("a.test"), family: .any, addresses: addresses, ttl: 60, origin: .cares)
        #expect(stored?.addresses.map(\.ip.description) == expected)
    }

    @Test("fastest puts a measured fast IPv6 address before unmeasured IPv4 ones")
    func fastestByScore() {
        let cache = Self.cache(ManualClock(), .init(dualStack: .fastest))
        let host = name("a.test")
        cache.store(
            host, family: .any, addresses: ["192.0.2.1", "192.0.2.2", "2001:db8::1"].map(ip), ttl: 60, origin: .cares)
        cache.recordConnect(to: ip("2001:db8::1"), of: host, latency: .milliseconds(3))
        #expect(cache.rankedAddresses(for: host).map(\.ip.description) == ["2001:db8::1", "192.0.2.1", "192.0.2.2"])
    }

    @Test("a network change makes every answer stale and forgets measurements")
    func networkChange() {
        let clock = ManualClock()
        let cache = Self.cache(clock)
        let host = name("a.test")
        cache.store(host, family: .any, addresses: [ip("192.0.2.1"), ip("192.0.2.2")], ttl: 300, origin: .cares)
        cache.recordConnect(to: ip("192.0.2.2"), of: host, latency: .milliseconds(1))
        cache.markAllForRefresh()
        let lookup = cache.lookup(host, family: .any)
        guard case .hit(let answer, let refresh, _, _) = lookup else {
            Issue.record("expected a stale hit")
            return
        }
        #expect(answer.isStale)
        #expect(refresh)
        #expect(answer.addresses.allSatisfy { !$0.isMeasured })
    }

    @Test("save and load round-trip answers, scores and remaining TTLs; expired-beyond-staleness entries are dropped")
    func persistence() throws {
        let path = TemporaryFiles.path("cache.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let clock = ManualClock()
        let configuration = HostCache.Configuration(minimumTTL: 0, maximumStaleness: .seconds(600))
        let cache = Self.cache(clock, configuration)
        let host = name("a.test")
        cache.store(host, family: .any, addresses: ["192.0.2.1", "2001:db8::1"].map(ip), ttl: 300, origin: "doh-test")
        cache.store(name("short.test"), family: .ipv4, addresses: [ip("192.0.2.9")], ttl: 10, origin: .cares)
        cache.storeNegative(name("gone.test"), family: .any, error: HTTPDNSError(code: .notFound, message: "nx"))
        cache.recordConnect(to: ip("2001:db8::1"), of: host, latency: .milliseconds(4))
        cache.setProbePort(8443, for: host)
        try cache.save(to: path)

        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasPrefix(URL(fileURLWithPath: path).lastPathComponent + ".tmp") }
        #expect(leftovers.isEmpty, "the temporary file was renamed")

        // A restart 100 s later.
        let later = ManualClock(wallStart: clock.wallStart + 100)
        let restored = Self.cache(later, configuration)
        let report = restored.load(from: path)
        #expect(report.problem == nil)
        #expect(report.loaded == 2)
        let answer = try #require(restored.resolution(for: host))
        #expect(answer.freshness == .cache)
        #expect(answer.origin == "doh-test")
        #expect(answer.ttl == 200)
        #expect(answer.best == ip("2001:db8::1"), "scores survive")
        #expect(answer.addresses.first?.latencyMilliseconds == 4)
        let short = try #require(restored.resolution(for: name("short.test"), family: .ipv4))
        #expect(short.isStale)
        #expect(restored.lookup(name("gone.test"), family: .any).isMiss, "negative answers are not persisted")

        // A restart beyond the maximum staleness drops what expired long ago.
        let muchLater = ManualClock(wallStart: clock.wallStart + 1000)
        let pruned = Self.cache(muchLater, configuration)
        let prunedReport = pruned.load(from: path)
        #expect(prunedReport.loaded == 0)
        #expect(prunedReport.dropped == 2)
        #expect(pruned.count == 0)
    }

    static let corruptFiles: [(String, Data)] = [
        ("empty", Data()),
        ("random bytes", Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) })),
        ("truncated", Data(#"{"format":"swift-httpdns-cache","version":1,"savedAt":1.0,"hosts":[{"name":"a.te"#.utf8)),
        ("foreign JSON", Data(#"{"name": "something else", "items": [1, 2, 3]}"#.utf8)),
        ("a JSON array", Data("[1, 2, 3]".utf8)),
        ("another version", Data(#"{"format":"swift-httpdns-cache","version":99,"savedAt":1.0,"hosts":[]}"#.utf8)),
        ("wrong types", Data(#"{"format":"swift-httpdns-cache","version":1,"savedAt":"x","hosts":"y"}"#.utf8)),
        ("NUL bytes", Data([0, 0, 0, 123, 0])),
    ]

    @Test("corrupt, truncated and foreign files are ignored with a warning", arguments: 0..<corruptFiles.count)
    func corrupt(index: Int) throws {
        let (label, data) = Self.corruptFiles[index]
        let path = TemporaryFiles.path("cache.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try data.write(to: URL(fileURLWithPath: path))
        let store = LogStore()
        let logger = Logger(label: "test") { _ in RecordingLogHandler(store: store) }
        let cache = Self.cache(ManualClock())
        let report = cache.load(from: path, logger: logger)
        #expect(report.problem != nil, "\(label)")
        #expect(report.loaded == 0)
        #expect(cache.count == 0)
        #expect(store.lines.withLock { $0.contains { $0.contains("ignoring the persisted cache") } }, "\(label)")
    }

    @Test("malformed entries are skipped and the good ones kept; a directory or missing file is no problem")
    func partial() throws {
        let path = TemporaryFiles.path("cache.json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let wall = 1_800_000_000.0
        let text = """
            {"format":"swift-httpdns-cache","version":1,"savedAt":\(wall),"hosts":[
              {"name":"good.test","answers":[{"family":"any","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":["192.0.2.1"]}],"scores":[]},
              {"name":"bad..name","answers":[{"family":"any","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":["192.0.2.2"]}],"scores":[]},
              {"name":"badip.test","answers":[{"family":"any","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":["999.1.1.1"]}],"scores":[]},
              {"name":"badfamily.test","answers":[{"family":"ipv5","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":["192.0.2.3"]}],"scores":[]},
              {"name":"mismatch.test","answers":[{"family":"ipv6","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":["192.0.2.4"]}],"scores":[]},
              {"name":"empty.test","answers":[{"family":"any","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":[]}],"scores":[]},
              {"name":"badscore.test","answers":[{"family":"any","origin":"cares","ttl":60,"expiresAt":\(wall + 60),"addresses":["192.0.2.5"]}],
               "scores":[{"ip":"192.0.2.5","latencyMs":-5,"penaltyMs":0,"successes":1,"failures":0}]}
            ]}
            """
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let cache = Self.cache(ManualClock(wallStart: wall))
        let report = cache.load(from: path)
        #expect(report.problem == nil)
        #expect(report.loaded == 2)
        #expect(report.dropped == 5)
        #expect(cache.bestAddress(for: name("good.test")) == ip("192.0.2.1"))
        #expect(
            cache.rankedAddresses(for: name("badscore.test")).first?.isMeasured == false, "the bad score is skipped")

        let missing = cache.load(from: TemporaryFiles.path("cache.json"))
        #expect(missing.problem == nil && missing.loaded == 0)
        let directory = FileManager.default.temporaryDirectory.path
        #expect(cache.load(from: directory).problem != nil)
    }

    @Test("a save into a missing directory creates it; an unwritable path is a fileError")
    func saveErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = Self.cache(ManualClock())
        cache.store(name("a.test"), family: .any, addresses: [ip("192.0.2.1")], ttl: 60, origin: .cares)
        try cache.save(to: directory.appendingPathComponent("nested/cache.json").path)
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("nested/cache.json").path))
        #expect(throws: HTTPDNSError.self) { try cache.save(to: "/proc/version/cache.json") }
    }
}

extension HostCacheCore.Lookup {
    var isMiss: Bool {
        if case .miss = self { return true }
        return false
    }

    var refresh: Bool? {
        if case .hit(_, let refresh, _, _) = self { return refresh }
        return nil
    }

    var negativeCode: HTTPDNSError.Code? {
        if case .negative(let error) = self { return error.code }
        return nil
    }
}
