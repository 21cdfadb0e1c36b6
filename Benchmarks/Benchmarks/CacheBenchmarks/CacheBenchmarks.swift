import Benchmark
import Foundation
@_spi(Benchmarks) import HTTPDNS
import Synchronization

// The scored IP cache and the host resolver on cache hits, each beside its baseline in the same run:
// - the cache's best-address lookup beside a plain Mutex-guarded Dictionary lookup;
// - the full async resolve on a hit;
// - the first resolve after a restart from the persisted cache beside a cold first resolve through an upstream
//   that takes 20 ms (a stand-in for one network round trip).
// No servers needed.

let hostCount = 10_000
let names: [HostName] = (0..<hostCount).map { try! HostName("host\($0).bench.test") }
let addresses: [[IPAddress]] = (0..<hostCount).map { (index: Int) -> [IPAddress] in
    let high = UInt8(truncatingIfNeeded: index >> 8)
    let low = UInt8(truncatingIfNeeded: index)
    return [IPAddress("10.1.\(high).\(low)")!, IPAddress("10.200.\(high).\(low)")!]
}

func filledCache() -> HostCache {
    let cache = HostCache(configuration: .init(maximumTTL: 86_400))
    for index in 0..<hostCount {
        cache.benchmarkStore(names[index], addresses: addresses[index], ttl: 86_400)
    }
    return cache
}

/// The address every upstream answer gives.
let upstreamAddress = IPAddress("192.0.2.1")!

/// An upstream that answers every name after `delay`, counting calls.
final class DelayedUpstream: HostNameResolver {
    let delay: Duration
    let calls = Atomic<Int>(0)

    init(delay: Duration) { self.delay = delay }

    func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        calls.add(1, ordering: .relaxed)
        try await Task.sleep(for: delay)
        return Resolution(
            host: host.description, addresses: [ResolvedAddress(ip: upstreamAddress, ttl: 300, source: .cares)])
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 20)
    let hits = Benchmark.Configuration(metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .mega)

    Benchmark("baseline: Mutex<[HostName: IPAddress]> lookup", configuration: hits) { benchmark in
        let table = Mutex(
            [HostName: IPAddress](uniqueKeysWithValues: (0..<hostCount).map { (names[$0], addresses[$0][0]) }))
        var found = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            if table.withLock({ $0[names[index % hostCount]] }) != nil { found += 1 }
        }
        benchmark.stopMeasurement()
        precondition(found == benchmark.scaledIterations.count)
        blackHole(found)
    }

    Benchmark("cache: bestAddress of a cached host (10,000 hosts)", configuration: hits) { benchmark in
        let cache = filledCache()
        var found = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            if cache.benchmarkBestAddress(for: names[index % hostCount]) != nil { found += 1 }
        }
        benchmark.stopMeasurement()
        precondition(found == benchmark.scaledIterations.count)
        blackHole(found)
    }

    Benchmark("resolver: async resolveRanked on a cache hit (10,000 hosts)", configuration: hits) { benchmark in
        let upstream = DelayedUpstream(delay: .milliseconds(20))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
            cache: filledCache(),
            configuration: pipeline()
        )
        var found = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            found += try await resolver.benchmarkResolveRanked(names[index % hostCount]).addresses.count
        }
        benchmark.stopMeasurement()
        precondition(upstream.calls.load(ordering: .relaxed) == 0 && found > 0)
        await resolver.shutdown()
        blackHole(found)
    }

    // Restart: a new resolver loads the persisted file; its first resolve must not wait for the upstream.
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("httpdns-bench-cache.json").path
    // Written as an application does: a resolver with a cache file saves it (here at once, with saveCache()).
    let writer = HostResolver(
        upstreams: [], cache: filledCache(), configuration: pipeline(cachePath: path))
    writer.benchmarkSaveCache()
    let restart = Benchmark.Configuration(metrics: [.wallClock], maxDuration: .seconds(10), maxIterations: 50)

    Benchmark("restart: create the resolver and load 10,000 persisted hosts", configuration: restart) { benchmark in
        let upstream = DelayedUpstream(delay: .milliseconds(20))
        let configuration = pipeline(cachePath: path)
        benchmark.startMeasurement()
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
            cache: HostCache(),
            configuration: configuration
        )
        benchmark.stopMeasurement()
        precondition(resolver.benchmarkCache?.benchmarkCount == hostCount)
        blackHole(resolver)
    }

    Benchmark("restart: first resolve of a persisted host", configuration: restart) { benchmark in
        let upstream = DelayedUpstream(delay: .milliseconds(20))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
            cache: HostCache(),
            configuration: pipeline(cachePath: path)
        )
        benchmark.startMeasurement()
        let answer = try await resolver.benchmarkResolveRanked(names[4242])
        benchmark.stopMeasurement()
        precondition(answer.freshness == .cache && upstream.calls.load(ordering: .relaxed) == 0)
        blackHole(answer)
    }

    Benchmark("baseline: first resolve with an empty cache (upstream takes 20 ms)", configuration: restart) {
        benchmark in
        let upstream = DelayedUpstream(delay: .milliseconds(20))
        let resolver = HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)],
            cache: HostCache(),
            configuration: pipeline()
        )
        benchmark.startMeasurement()
        let answer = try await resolver.benchmarkResolveRanked(names[4242])
        benchmark.stopMeasurement()
        precondition(answer.freshness == .upstream && upstream.calls.load(ordering: .relaxed) == 1)
        blackHole(answer)
    }
}

/// A resolver's pipeline for these benchmarks: no probing, no network watcher, the cache saved only when asked.
func pipeline(cachePath: String? = nil) -> HostResolver.Configuration {
    var configuration = HostResolver.Configuration()
    configuration.probeEnabled = false
    configuration.network.watch = false
    configuration.cachePath = cachePath
    configuration.cacheSaveInterval = .zero
    return configuration
}
