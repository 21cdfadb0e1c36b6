public import HTTPDNSCore

// What the benchmarks package (a separate package) measures inside the cache and the resolver, behind
// `@_spi(Benchmarks)`: not API. Each call is inlined into the benchmark, so it measures the internal call itself.

extension HostCache {
    /// Stores `addresses` for `host` (family `any`, origin c-ares), as the resolver does with an upstream's answer.
    @_spi(Benchmarks) @inlinable public func benchmarkStore(_ host: HostName, addresses: [IPAddress], ttl: UInt32) {
        store(host, family: .any, addresses: addresses, ttl: ttl, origin: .cares)
    }

    /// The best fresh address of `host`: the cache's lookup on a hit.
    @_spi(Benchmarks) @inlinable public func benchmarkBestAddress(for host: HostName) -> IPAddress? {
        bestAddress(for: host)
    }

    /// The number of hosts held.
    @_spi(Benchmarks) @inlinable public var benchmarkCount: Int { count }
}

extension HostResolver {
    /// The resolver's cache.
    @_spi(Benchmarks) @inlinable public var benchmarkCache: HostCache? { cache }

    /// ``resolveRanked(_:family:port:)`` with the name parsed already, as the fronts call it.
    @_spi(Benchmarks) @inlinable public func benchmarkResolveRanked(_ host: HostName) async throws -> RankedResolution {
        try await resolveRanked(host)
    }

    /// Writes the cache file now, as the periodic save and `shutdown()` do.
    @_spi(Benchmarks) @inlinable public func benchmarkSaveCache() { saveCache() }
}
