import Foundation
import Synchronization
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore

/// Work the resolver starts on its own is bounded: probes per answer, optional background tasks, and files with a
/// bad line at start are still followed.
@Suite("Bounded resources")
struct BoundedResourceTests {
    /// Real TCP connects, counted.
    final class CountingProber: ConnectProber {
        let inner = TCPConnectProber()
        let count = Atomic<Int>(0)
        func probe(_ ip: IPAddress, port: Int, timeout: Duration) async -> ProbeOutcome {
            count.add(1, ordering: .relaxed)
            return await inner.probe(ip, port: port, timeout: timeout)
        }
    }

    @Test("an answer with 40 addresses is probed 16 at most per round")
    func probesPerAnswerCapped() async throws {
        let closed = try TCPListener(ip: "127.0.0.1", listening: false)  // refused: each probe ends at once
        defer { closed.close() }
        let overrides = HostOverrides()
        overrides.set((1...40).map { IPAddress(ipv4: 127, 0, 1, UInt8($0)) }, for: try HostPattern("many.test"))
        let prober = CountingProber()
        let resolver = HostResolver(
            upstreams: [], overrides: overrides, prober: prober,
            configuration: .parts(probing: .init(ports: [Int(closed.port)], timeout: .seconds(1))))
        #expect(try await resolver.resolveRanked("many.test").addresses.count == 40, "every address is still answered")
        await resolver.waitForBackgroundWork()
        #expect(prober.count.load(ordering: .relaxed) == 16)
        await resolver.shutdown()
    }

    @Test("optional background work beyond the limit is refused; required work is not")
    func optionalWorkLimited() async {
        let tasks = BackgroundTasks(optionalLimit: 2)
        let gate = Atomic<Bool>(false)
        for _ in 0..<2 {
            #expect(
                tasks.spawn(optional: true) {
                    while !gate.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(5)) }
                })
        }
        #expect(!tasks.spawn(optional: true) {}, "a third optional task is refused")
        #expect(tasks.spawn {}, "required work still runs")
        gate.store(true, ordering: .relaxed)
        await tasks.waitForAll()
        #expect(tasks.spawn(optional: true) {}, "room again once the others ended")
        await tasks.shutdown()
    }

    @Test("an overrides file with a bad line at start is followed all the same, so the fix is picked up")
    func badLineAtStartStillWatched() async throws {
        let files = try TemporaryFiles()
        let path = try files.write("overrides", "999.0.0.1 broken.test\n192.0.2.5 ok.test\n")
        var settings = HostResolver.Configuration.default
        settings.sources = [.overrides]
        settings.files.overridesFile = path
        settings.files.reloadIntervalMilliseconds = 20
        settings.systemFallback = false
        settings.probeEnabled = false
        let resolver = try HostResolver(configuration: settings, persistingCache: false)
        #expect(try await resolver.resolveRanked("ok.test").best?.description == "192.0.2.5", "the good lines are used")
        try "192.0.2.6 broken.test\n192.0.2.5 ok.test\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(
            try await waitUntil { (try? await resolver.resolveRanked("broken.test"))?.best?.description == "192.0.2.6" }
        )
        await resolver.shutdown()
    }
}

extension BoundedResourceTests {
    @Test("the periodic save ends when the resolver is released without shutdown()")
    func maintenanceEndsWithResolver() async throws {
        let files = try TemporaryFiles()
        var resolver: HostResolver? = HostResolver(
            upstreams: [], prober: nil,
            configuration: .parts(
                probing: nil, cachePath: files.directory.appendingPathComponent("c.json").path,
                saveInterval: .milliseconds(10)))
        let id = ObjectIdentifier(try #require(resolver))
        #expect(HostResolver.maintenanceLoops.withLock { $0.contains(id) })
        try await Task.sleep(for: .milliseconds(30))
        resolver = nil
        #expect(try await waitUntil { !HostResolver.maintenanceLoops.withLock { $0.contains(id) } }, "the loop ended")
    }
}

extension BoundedResourceTests {
    @Test("fault injection: an in-place (non-atomic) edit of a watched file ends in its final content")
    func inPlaceEdit() async throws {
        let files = try TemporaryFiles()
        let path = try files.write("overrides", "192.0.2.5 a.test\n")
        let overrides = HostOverrides()
        let watcher = try overrides.watch(
            path: path, interval: .milliseconds(5),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        defer { watcher.stop() }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.truncateFile(atOffset: 0)
        try await Task.sleep(for: .milliseconds(30))
        handle.write(Data("192.0.2.6 a".utf8))
        try await Task.sleep(for: .milliseconds(30))
        handle.write(Data(".test\n192.0.2.7 b.test\n".utf8))
        try handle.close()
        let a = try HostName("a.test")
        let b = try HostName("b.test")
        #expect(
            try await waitUntil {
                overrides.resolve(a, family: .ipv4)?.addresses.first?.ip.description == "192.0.2.6"
                    && overrides.resolve(b, family: .ipv4)?.addresses.first?.ip.description == "192.0.2.7"
            })
    }
}
