import AsyncHTTPClient
import Logging
import NIOCore
import Testing
import TestSupport

@testable import HTTPDNS
@testable import HTTPDNSCAres
@testable import HTTPDNSClients
@testable import HTTPDNSCore
import HTTPDNSPinnedClients

/// The one pool of pinned AsyncHTTPClient clients: keys, per-profile limits, users coming and going, shutdown.
@Suite("Pinned client pool")
struct PinnedClientPoolTests {
    static let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    static func profile(connectTimeout: Duration = .seconds(2), maximumClients: Int = 8) -> PinnedClientPool.Profile {
        PinnedClientPool.Profile(
            trustRoots: [], connectTimeout: connectTimeout, idleConnectionTimeout: .seconds(60),
            maximumConnectionsPerHost: 4, maximumClients: maximumClients)
    }

    static func target(_ host: String, _ ip: String = "127.0.0.1") -> PinnedClientPool.Target {
        PinnedClientPool.Target(host: host, address: IPAddress(ip))
    }

    /// Whether `client` was shut down: it refuses a request at once (the address is never connected to).
    static func isShutDown(_ client: HTTPClient) async -> Bool {
        do {
            _ = try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:9/"), timeout: .seconds(2))
            return false
        } catch let error as HTTPClientError {
            return error == .alreadyShutdown
        } catch {
            return false
        }
    }

    @Test("users of one profile share its clients; another profile (other trust or timeouts) never does")
    func profilesAreKeys() async throws {
        let pool = PinnedClientPool(logger: Self.logger)
        let first = Self.profile()
        let second = Self.profile(connectTimeout: .seconds(3))
        try pool.register(first)
        try pool.register(first)
        try pool.register(second)
        let a = try pool.acquire(Self.target("web.test"), profile: first)
        let b = try pool.acquire(Self.target("web.test"), profile: first)
        let c = try pool.acquire(Self.target("web.test"), profile: second)
        let d = try pool.acquire(Self.target("web.test", "127.0.0.2"), profile: first)
        #expect(a.client === b.client)
        #expect(a.client !== c.client, "another profile gets a client of its own")
        #expect(a.client !== d.client, "another address gets a client of its own")
        #expect(pool.clientCount(profile: first) == 2)
        #expect(pool.clientCount(profile: second) == 1)
        #expect(pool.clientCount() == 3)
        for lease in [a, b, c, d] { pool.release(lease) }
        await pool.shutdown()
        #expect(pool.clientCount() == 0)
        #expect(await Self.isShutDown(a.client))
        #expect(throws: PinnedClientPool.Closed.self) { try pool.acquire(Self.target("web.test"), profile: first) }
        #expect(throws: HTTPDNSError.self) { try pool.register(first) }
    }

    @Test("pinned clients carry no tracer of their own: the fronts' hop spans never hold the URL's query")
    func clientsDoNotTrace() async throws {
        let pool = PinnedClientPool(logger: Self.logger)
        let profile = Self.profile()
        try pool.register(profile)
        let lease = try pool.acquire(Self.target("web.test"), profile: profile)
        // AsyncHTTPClient's default is the process's tracer (a no-op one here, not nil): its request span would add
        // `url.full` and `url.query` beside the front's hop span, and build those attributes even when not recording.
        #expect(lease.client.tracer == nil)
        pool.release(lease)
        await pool.shutdown()
    }

    @Test("a profile keeps at most its limit: the least recently used goes, a busy one once its request ends")
    func leastRecentlyUsedPerProfile() async throws {
        let pool = PinnedClientPool(logger: Self.logger)
        let small = Self.profile(maximumClients: 2)
        let other = Self.profile(connectTimeout: .seconds(5))
        try pool.register(small)
        try pool.register(other)
        let untouched = try pool.acquire(Self.target("keep.test"), profile: other)
        pool.release(untouched)
        let busy = try pool.acquire(Self.target("one.test"), profile: small)
        let idle = try pool.acquire(Self.target("two.test"), profile: small)
        pool.release(idle)
        let third = try pool.acquire(Self.target("three.test"), profile: small)
        pool.release(third)
        #expect(pool.clientCount(profile: small) == 2)
        #expect(pool.clientCount(profile: other) == 1, "another profile's clients do not count against the limit")
        #expect(!(await Self.isShutDown(busy.client)), "a client with a request in flight is not closed under it")
        pool.release(busy)
        await pool.waitForClosing()
        #expect(await Self.isShutDown(busy.client))
        #expect(!(await Self.isShutDown(idle.client)))
        #expect(!(await Self.isShutDown(untouched.client)))
        await pool.shutdown()
    }

    @Test("the last user leaving closes its profile's clients and refuses new leases; other profiles stay")
    func lastUserLeaves() async throws {
        let pool = PinnedClientPool(logger: Self.logger)
        let shared = Self.profile()
        let other = Self.profile(connectTimeout: .seconds(5))
        try pool.register(shared)
        try pool.register(shared)
        try pool.register(other)
        let lease = try pool.acquire(Self.target("web.test"), profile: shared)
        pool.release(lease)
        let kept = try pool.acquire(Self.target("web.test"), profile: other)
        pool.release(kept)
        pool.unregister(shared)
        #expect(pool.clientCount(profile: shared) == 1, "one user is left")
        pool.unregister(shared)
        await pool.waitForClosing()
        #expect(pool.clientCount(profile: shared) == 0)
        #expect(await Self.isShutDown(lease.client))
        #expect(throws: PinnedClientPool.Closed.self) { try pool.acquire(Self.target("web.test"), profile: shared) }
        #expect(pool.clientCount(profile: other) == 1)
        #expect(!(await Self.isShutDown(kept.client)))
        await pool.shutdown()
    }

    @Test("a profile with an unreadable trust root or a limit of zero is refused")
    func badProfiles() throws {
        let pool = PinnedClientPool(logger: Self.logger)
        var unreadable = Self.profile()
        unreadable.trustRoots = ["/nonexistent/ca.pem"]
        #expect(throws: HTTPDNSError.self) { try pool.register(unreadable) }
        #expect(throws: HTTPDNSError.self) { try pool.register(Self.profile(maximumClients: 0)) }
        #expect(throws: PinnedClientPool.Closed.self) { try pool.acquire(Self.target("web.test"), profile: unreadable) }
    }
}
