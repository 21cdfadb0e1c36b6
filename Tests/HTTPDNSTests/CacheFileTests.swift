import Foundation
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// The persisted cache file cannot crash the process or lose the cache: hostile values, malformed entries, two
/// processes saving, interrupted writers, the size rule.
@Suite("Cache file hardening")
struct CacheFileTests {
    static func file(hosts: String) -> String {
        #"{"format": "swift-httpdns-cache", "version": 1, "savedAt": \#(Date().timeIntervalSince1970), "hosts": [\#(hosts)]}"#
    }

    static func host(_ name: String, ip: String = "192.0.2.80", score: String? = nil) -> String {
        let expires = Date().timeIntervalSince1970 + 300
        let scores = score ?? #"{"ip": "\#(ip)", "latencyMs": 5, "penaltyMs": 0, "successes": 1, "failures": 0}"#
        return
            #"{"name": "\#(name)", "answers": [{"family": "any", "origin": "cares", "ttl": 300, "expiresAt": \#(expires), "addresses": ["\#(ip)"]}], "scores": [\#(scores)]}"#
    }

    @Test("extreme counters and latencies load and keep working")
    func extremeValues() throws {
        let files = try TemporaryFiles()
        let score =
            #"{"ip": "192.0.2.80", "latencyMs": 1e300, "penaltyMs": 1e300, "successes": 9223372036854775807, "failures": 9223372036854775807, "firstByteMs": 1e300}"#
        let path = try files.write("cache.json", Self.file(hosts: Self.host("extreme.test", score: score)))
        let cache = HostCache()
        #expect(cache.load(from: path).loaded == 1)
        let host = try HostName("extreme.test")
        cache.recordConnect(to: IPAddress("192.0.2.80")!, of: host, latency: .milliseconds(3))
        cache.recordFailure(to: IPAddress("192.0.2.80")!, of: host)
        cache.recordFirstByte(to: IPAddress("192.0.2.80")!, of: host, latency: .milliseconds(4))
        let ranked = cache.rankedAddresses(for: host)
        #expect(ranked.count == 1 && ranked[0].score.isFinite)
        #expect((ranked[0].latencyMilliseconds ?? 0) <= 600_000)
        try cache.save(to: path)
        #expect(HostCache().load(from: path).loaded == 1, "what was saved loads again")
    }

    @Test("a malformed host or score is skipped, not the whole file")
    func malformedEntries() throws {
        let files = try TemporaryFiles()
        let hosts = [
            Self.host("good.test"), #"{"name": 5, "answers": []}"#, #"{"name": "bad-answers.test", "answers": "x"}"#,
            Self.host("bad-score.test", score: #"{"ip": "192.0.2.80", "latencyMs": "fast"}"#), Self.host("good2.test"),
        ]
        let path = try files.write("cache.json", Self.file(hosts: hosts.joined(separator: ",")))
        let cache = HostCache()
        let report = cache.load(from: path)
        #expect(report.problem == nil)
        #expect(report.loaded == 3, "good.test, bad-score.test (without its score) and good2.test")
        #expect(report.dropped >= 2)
        #expect(cache.resolution(for: try HostName("good2.test")) != nil)
    }

    @Test("two processes saving one file keep each other's hosts; removed and cleared hosts stay gone")
    func concurrentSavers() throws {
        let files = try TemporaryFiles()
        let path = files.directory.appendingPathComponent("cache.json").path
        let first = HostCache()
        let second = HostCache()
        first.store(
            try HostName("one.test"), family: .any, addresses: [IPAddress("192.0.2.81")!], ttl: 300, origin: .cares)
        second.store(
            try HostName("two.test"), family: .any, addresses: [IPAddress("192.0.2.82")!], ttl: 300, origin: .cares)
        try first.save(to: path)
        try second.save(to: path)
        let merged = HostCache()
        #expect(merged.load(from: path).loaded == 2, "the second save kept the first one's host")
        merged.remove(try HostName("one.test"))
        try merged.save(to: path)
        let afterRemove = HostCache()
        afterRemove.load(from: path)
        #expect(afterRemove.resolution(for: try HostName("one.test")) == nil, "a removed host is not merged back")
        afterRemove.removeAll()
        try afterRemove.save(to: path)
        #expect(HostCache().load(from: path).loaded == 0, "a cleared cache is not merged back")
        #expect(FileManager.default.fileExists(atPath: path + ".lock"))
    }

    @Test("temporary files of interrupted writers are cleaned up; fresh ones are left alone")
    func staleTemporaries() throws {
        let files = try TemporaryFiles()
        let path = files.directory.appendingPathComponent("cache.json").path
        let old = try files.write("cache.json.tmp-1-1", "partial")
        let fresh = try files.write("cache.json.tmp-2-2", "partial")
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-3600)], ofItemAtPath: old)
        try HostCache().save(to: path)
        #expect(!FileManager.default.fileExists(atPath: old))
        #expect(FileManager.default.fileExists(atPath: fresh), "maybe another writer's, still in progress")
    }

    @Test("the writer leaves out the least recently used hosts rather than write a file the reader rejects")
    func sizeRule() throws {
        let hosts = (0..<100).map { index in
            CacheFile.Host(
                name: "h\(index).test", probePort: nil,
                answers: [.init(family: "any", origin: "cares", ttl: 300, expiresAt: 1, addresses: ["192.0.2.1"])],
                scores: [], overrides: nil)
        }
        let file = CacheFile(
            format: CacheFile.formatName, version: CacheFile.currentVersion,
            saved: .init(wall: 0, boot: 0, bootID: nil), hosts: hosts)
        let whole = try file.encoded()
        let limited = try file.encoded(limit: whole.count / 2)
        #expect(limited.count <= whole.count / 2)
        let decoded = try JSONDecoder().decode(CacheFile.self, from: limited)
        #expect(decoded.hosts.first?.name == "h0.test", "the most recently used are kept")
        #expect(decoded.hosts.count < 100)
    }
}
