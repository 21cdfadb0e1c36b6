import Foundation
import Logging
import TestSupport
import Testing

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
import HTTPDNSPinnedClients

/// Network changes for real: the watcher (rtnetlink on its own thread) watches a network namespace the test makes,
/// and the test adds and removes addresses and default routes there with `ip`.
@Suite(
    "Network changes",
    .enabled(if: NetworkNamespace.available || ProcessInfo.processInfo.environment["CI"] != nil))
struct NetworkChangeTests {
    /// Collects what a watcher of `namespace` reports.
    final class Changes: Sendable {
        let seen = Locked<[NetworkChange]>([])
        var all: [NetworkChange] { seen.withLock { $0 } }
    }

    @Test("addresses and default routes: each settled change reported once, a burst of 20 as one")
    func monitor() async throws {
        try await NetworkNamespace.with { namespace in
            let changes = Changes()
            let monitor = try NetworkMonitor(
                namespace: namespace.path, debounce: .milliseconds(100), logger: Logger(label: "test")
            ) { change in changes.seen.withLock { $0.append(change) } }
            defer { monitor.shutdown() }
            #expect(monitor.initialKey.hasPrefix("no default route"))

            try await namespace.inside(["addr", "add", "192.0.2.10/24", "dev", "a0"])
            #expect(try await waitUntil { changes.all.count == 1 })
            let added = try #require(changes.all.first)
            #expect(added.addedAddresses == [IPAddress(ipv4: 192, 0, 2, 10)] && added.isNewNetwork)
            #expect(added.current.contains("192.0.2.0/24"))

            try await namespace.inside(["route", "add", "default", "via", "192.0.2.1"])
            #expect(try await waitUntil { changes.all.count == 2 })
            #expect(changes.all.last?.current.hasPrefix("ipv4 via 192.0.2.1 dev a0") == true)
            #expect(changes.all.last?.addedAddresses.isEmpty == true)

            try await namespace.batch((11..<31).map { "addr add 198.51.100.\($0)/32 dev a0" })
            #expect(try await waitUntil { changes.all.count >= 3 })
            try await Task.sleep(for: .milliseconds(400))
            #expect(changes.all.count == 3, "one burst, one change: \(changes.all.count - 2)")
            #expect(changes.all.last?.addedAddresses.count == 20)

            try await namespace.inside(["addr", "del", "192.0.2.10/24", "dev", "a0"])
            #expect(try await waitUntil { changes.all.count == 4 })
            #expect(changes.all.last?.removedAddresses == [IPAddress(ipv4: 192, 0, 2, 10)])
            #expect(
                changes.all.last?.current.contains("192.0.2.0/24") == false && changes.all.last?.isNewNetwork == true)
        }
    }

    /// A resolver watching `namespace`, its cache holding `api.test` with two scored addresses.
    static func watchingResolver(_ namespace: NetworkNamespace) throws -> HostResolver {
        var configuration = HostResolver.Configuration.parts(probing: nil)
        configuration.network.watch = true
        configuration.network.namespace = namespace.path
        let upstream = FakeUpstream(.answer(["api.test": ["192.0.2.50", "192.0.2.51"]], ttl: 300))
        return HostResolver(
            upstreams: [.init(name: "cares", kind: .cares, resolver: upstream)], prober: nil,
            configuration: configuration)
    }

    @Test("a new default route: the first request uses the new network's scores (none), never the old one's")
    func scoresPerNetwork() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.inside(["addr", "add", "192.0.2.10/24", "dev", "a0"])
            try await namespace.inside(["route", "add", "default", "via", "192.0.2.1"])
            let resolver = try Self.watchingResolver(namespace)
            let changes = resolver.networkChanges()
            let host = try HostName("api.test")
            _ = try await resolver.resolveRanked("api.test")
            // Home network: .51 measured fast, .50 slow.
            resolver.reportConnect(to: IPAddress(ipv4: 192, 0, 2, 51), of: host, latency: .milliseconds(2))
            resolver.reportConnect(to: IPAddress(ipv4: 192, 0, 2, 50), of: host, latency: .milliseconds(90))
            #expect(try await resolver.resolveRanked("api.test").best == IPAddress(ipv4: 192, 0, 2, 51))

            // Another network: another default route.
            try await namespace.inside(["route", "replace", "default", "via", "192.0.2.254"])
            var iterator = changes.makeAsyncIterator()
            let change = try #require(await iterator.next())
            #expect(change.isNewNetwork && change.current.hasPrefix("ipv4 via 192.0.2.254"))
            let first = try await resolver.resolveRanked("api.test")
            #expect(first.addresses.allSatisfy { !$0.isMeasured }, "the old network's scores steered: \(first)")
            resolver.reportConnect(to: IPAddress(ipv4: 192, 0, 2, 50), of: host, latency: .milliseconds(3))
            #expect(try await resolver.resolveRanked("api.test").best == IPAddress(ipv4: 192, 0, 2, 50))

            // Back home: its scores come back.
            try await namespace.inside(["route", "replace", "default", "via", "192.0.2.1"])
            _ = try #require(await iterator.next())
            let home = try await resolver.resolveRanked("api.test")
            #expect(home.best == IPAddress(ipv4: 192, 0, 2, 51))
            #expect(home.addresses.first { $0.ip == IPAddress(ipv4: 192, 0, 2, 51) }?.latencyMilliseconds == 2)
            await resolver.shutdown()
            #expect(await iterator.next() == nil, "the sequence ends with the resolver")
        }
    }

    @Test("an address removed: pooled connections are closed, so no later request goes through a dead one")
    func poolRetired() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.inside(["addr", "add", "192.0.2.10/24", "dev", "a0"])
            let resolver = try Self.watchingResolver(namespace)
            let changes = resolver.networkChanges()
            let profile = PinnedClientPoolTests.profile()
            try resolver.clientPool.register(profile)
            let lease = try resolver.clientPool.acquire(PinnedClientPoolTests.target("api.test"), profile: profile)
            resolver.clientPool.release(lease)
            #expect(resolver.clientPool.clientCount() == 1)
            try await namespace.inside(["addr", "del", "192.0.2.10/24", "dev", "a0"])
            var iterator = changes.makeAsyncIterator()
            let change = try #require(await iterator.next())
            #expect(change.removedAddresses == [IPAddress(ipv4: 192, 0, 2, 10)])
            #expect(resolver.clientPool.clientCount() == 0, "connections through the removed address are closed")
            resolver.clientPool.unregister(profile)
            await resolver.shutdown()
        }
    }
}
