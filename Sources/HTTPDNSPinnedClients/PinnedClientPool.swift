package import AsyncHTTPClient
package import Logging
package import NIOCore
import NIOPosix
import NIOSSL
import Synchronization
package import HTTPDNSCore

/// The AsyncHTTPClient clients of the package, each pinned to one address, in one bounded least-recently-used set:
/// HTTP DNS over HTTP/1.1 and the exchange engine of both application fronts take their clients from here.
///
/// AsyncHTTPClient's `dnsOverride` connects to a chosen address while SNI and the certificate check stay on the real
/// host name, but it is a per-client setting, so there is one client per (host, address, proxy) and per
/// ``Profile``: the TLS trust and the timeouts are part of the key, so a private CA trusted for an internal DoH
/// server never serves an application's request. A resolver built from settings shares its pool with the
/// interceptors and clients made on it.
///
/// Clients never retry a failed connection themselves (`retryConnectionEstablishment = false`): their users decide
/// about failover. Each profile keeps at most ``Profile/maximumClients``; an evicted client is shut down in the
/// background once its last request ends, so eviction never fails a request in flight. Every user registers its
/// profile and unregisters it when it shuts down; the clients of a profile nobody uses any more are closed.
package final class PinnedClientPool: Sendable {
    /// The client settings of one user of the pool.
    package struct Profile: Sendable, Hashable {
        /// Extra trusted CA files, added to the system roots.
        package var trustRoots: [String]
        /// The time a TCP connect plus TLS handshake may take.
        package var connectTimeout: Duration
        /// How long an idle connection stays open for reuse.
        var idleConnectionTimeout: Duration
        /// The most HTTP/1.1 connections per client (HTTP/2 multiplexes on one).
        package var maximumConnectionsPerHost: Int
        /// The most clients of this profile kept at once.
        var maximumClients: Int

        package init(
            trustRoots: [String], connectTimeout: Duration, idleConnectionTimeout: Duration,
            maximumConnectionsPerHost: Int, maximumClients: Int
        ) {
            self.trustRoots = trustRoots
            self.connectTimeout = connectTimeout
            self.idleConnectionTimeout = idleConnectionTimeout
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.maximumClients = maximumClients
        }
    }

    /// Where a client's connections go.
    package struct Target: Sendable, Hashable {
        /// The real host, lowercased: the URL, `Host`, SNI and the certificate check name it.
        var host: String
        /// The address to connect to; `nil` lets AsyncHTTPClient resolve `host` itself.
        var address: IPAddress?
        /// An HTTP proxy to tunnel through (CONNECT to `host`, which the proxy resolves).
        var proxy: Proxy?

        package init(host: String, address: IPAddress?, proxy: Proxy? = nil) {
            self.host = host
            self.address = address
            self.proxy = proxy
        }
    }

    /// An HTTP proxy.
    package struct Proxy: Sendable, Hashable {
        var host: String
        var port: Int

        package init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    /// A client lent out; give it back with ``release(_:)`` when the exchange is over.
    package struct Lease: Sendable {
        package let client: HTTPClient
        /// Admits the client's requests as its connections can take them (see ``ConnectionGate``).
        package let gate: ConnectionGate
        fileprivate let key: Key
    }

    /// The pool was shut down, or the profile is not registered.
    package struct Closed: Error {
        package init() {}
    }

    fileprivate struct Key: Hashable, Sendable {
        var target: Target
        var profile: Profile
    }

    private struct Entry {
        var client: HTTPClient
        var gate: ConnectionGate
        var inFlight: Int
        var lastUse: UInt64
    }

    private struct Registration {
        var users: Int
        var tls: TLSConfiguration
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Evicted clients with requests still in flight, by identity.
        var retired: [ObjectIdentifier: Entry] = [:]
        var profiles: [Profile: Registration] = [:]
        var tick: UInt64 = 0
        var isShutdown = false

        /// Removes every client of `profile` (all when `nil`): idle ones are returned for closing, busy ones retire
        /// (all are returned when `closingBusy`).
        mutating func removeClients(of profile: Profile?, closingBusy: Bool) -> [HTTPClient] {
            var idle: [HTTPClient] = []
            for (key, entry) in entries where profile == nil || key.profile == profile {
                entries[key] = nil
                if entry.inFlight == 0 || closingBusy {
                    idle.append(entry.client)
                } else {
                    retired[ObjectIdentifier(entry.client)] = entry
                }
            }
            return idle
        }
    }

    /// The event loops the clients run on.
    package let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let state = Locked(State())
    private let closing = BackgroundClosers()

    /// A pool whose clients run on `eventLoopGroup`.
    package init(eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger) {
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    deinit {
        // AsyncHTTPClient requires an explicit shutdown; a pool dropped without one still closes its clients, which
        // stay alive until their shutdown completes.
        let clients = state.withLock { state in
            state.isShutdown ? [] : state.entries.values.map(\.client) + state.retired.values.map(\.client)
        }
        for client in clients { client.shutdown { _ in } }
    }

    /// Adds a user of `profile`, reading its trust roots.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` when a trust-root file cannot be read or holds no certificate,
    ///   or a timeout or limit is not positive; `HTTPDNSError.Code.shutdown` after ``shutdown()``.
    package func register(_ profile: Profile) throws(HTTPDNSError) {
        guard profile.connectTimeout > .zero, profile.maximumClients > 0, profile.maximumConnectionsPerHost > 0 else {
            throw HTTPDNSError(
                code: .invalidConfiguration, message: "the connect timeout and connection limits must be positive")
        }
        let known = state.withLock { state -> Bool? in
            guard !state.isShutdown else { return nil }
            guard state.profiles[profile] != nil else { return false }
            state.profiles[profile]!.users += 1
            return true
        }
        guard let known else { throw HTTPDNSError(code: .shutdown, message: "the HTTP client pool was shut down") }
        if known { return }
        let tls = try TLSConfiguration.verifiedClient(additionalTrustRoots: profile.trustRoots)
        state.withLock { state in
            if state.profiles[profile] != nil {
                state.profiles[profile]!.users += 1
            } else {
                state.profiles[profile] = Registration(users: 1, tls: tls)
            }
        }
    }

    /// Removes a user of `profile`; when it was the last, the profile's clients are closed (busy ones once their
    /// requests end).
    package func unregister(_ profile: Profile) {
        let idle = state.withLock { state -> [HTTPClient] in
            guard let registration = state.profiles[profile] else { return [] }
            if registration.users > 1 {
                state.profiles[profile]!.users -= 1
                return []
            }
            state.profiles[profile] = nil
            return state.removeClients(of: profile, closingBusy: false)
        }
        for client in idle { closing.close(client, logger: logger) }
    }

    /// Lends the client for `target` under `profile`, made on first use; the least recently used client of the
    /// profile beyond its limit is evicted.
    /// - Throws: ``Closed`` after ``shutdown()`` or for a profile that is not registered.
    package func acquire(_ target: Target, profile: Profile) throws(Closed) -> Lease {
        let key = Key(target: target, profile: profile)
        let (entry, evicted) = try state.withLock { state throws(Closed) -> (Entry, HTTPClient?) in
            guard !state.isShutdown, let registration = state.profiles[profile] else { throw Closed() }
            state.tick &+= 1
            if var entry = state.entries[key] {
                entry.inFlight += 1
                entry.lastUse = state.tick
                state.entries[key] = entry
                return (entry, nil)
            }
            let created = Entry(
                client: makeClient(for: key, tls: registration.tls),
                gate: ConnectionGate(limit: profile.maximumConnectionsPerHost), inFlight: 1, lastUse: state.tick)
            state.entries[key] = created
            let ofProfile = state.entries.filter { $0.key.profile == profile }
            guard ofProfile.count > profile.maximumClients,
                let (oldest, victim) = ofProfile.min(by: { $0.value.lastUse < $1.value.lastUse })
            else { return (created, nil) }
            state.entries[oldest] = nil
            if victim.inFlight == 0 { return (created, victim.client) }
            state.retired[ObjectIdentifier(victim.client)] = victim
            return (created, nil)
        }
        if let evicted { closing.close(evicted, logger: logger) }
        return Lease(client: entry.client, gate: entry.gate, key: key)
    }

    /// Gives a lent client back; an evicted or unregistered one is closed once its last request has ended.
    package func release(_ lease: Lease) {
        let finished = state.withLock { state -> HTTPClient? in
            if var entry = state.entries[lease.key], entry.client === lease.client {
                entry.inFlight -= 1
                state.entries[lease.key] = entry
                return nil
            }
            let id = ObjectIdentifier(lease.client)
            guard var entry = state.retired[id] else { return nil }
            entry.inFlight -= 1
            if entry.inFlight > 0 {
                state.retired[id] = entry
                return nil
            }
            state.retired[id] = nil
            return lease.client
        }
        if let finished { closing.close(finished, logger: logger) }
    }

    /// Stops reusing every client: idle ones close now, busy ones once their requests end, and later requests get
    /// new ones. After a network change, connections made through an address the host lost are dead, and those of
    /// the old network lead to addresses chosen for it.
    package func retireAll() {
        let idle = state.withLock { state in state.removeClients(of: nil, closingBusy: false) }
        for client in idle { closing.close(client, logger: logger) }
    }

    /// The clients kept for `profile` (every profile's when `nil`).
    package func clientCount(profile: Profile? = nil) -> Int {
        state.withLock { state in state.entries.keys.count { profile == nil || $0.profile == profile } }
    }

    /// Client shutdowns still running (for tests).
    package var closingCount: Int { closing.pending }

    /// Closes every client and waits for them to close; later acquisitions fail with ``Closed``.
    package func shutdown() async {
        let clients = state.withLock { state in
            state.isShutdown = true
            defer { state.retired.removeAll() }
            return state.removeClients(of: nil, closingBusy: true) + state.retired.values.map(\.client)
        }
        for client in clients { closing.close(client, logger: logger) }
        await closing.waitForAll()
    }

    /// Waits for the background shutdowns started so far (by eviction or ``unregister(_:)``).
    package func waitForClosing() async {
        await closing.waitForAll()
    }

    private func makeClient(for key: Key, tls: TLSConfiguration) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(key.profile.connectTimeout)),
            connectionPool: .init(
                idleTimeout: TimeAmount(key.profile.idleConnectionTimeout),
                concurrentHTTP1ConnectionsPerHostSoftLimit: key.profile.maximumConnectionsPerHost
            ),
            proxy: nil,
            decompression: .disabled
        )
        // AsyncHTTPClient would retry a failed connect with backoff until the connect timeout: a refused address or a
        // bad certificate would hold up failover for that long.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .automatic
        // The fronts trace each hop themselves (HopSpans), without the URL's query or credentials. AsyncHTTPClient's
        // own span would repeat the hop with `url.full` and `url.query`, and even with no tracer bootstrapped it builds
        // its attributes for every request (about 5 % of a front's CPU in the AsyncHTTPClient benchmark).
        configuration.tracing.tracer = nil
        // Every connection and stream holds an exchange to the deadline its request carries (see ExchangeDeadline).
        configuration.http1_1ConnectionDebugInitializer = ExchangeDeadline.installOnConnection
        configuration.http2StreamChannelDebugInitializer = ExchangeDeadline.installOnStream
        if let address = key.target.address { configuration.dnsOverride = [key.target.host: address.description] }
        if let proxy = key.target.proxy { configuration.proxy = .server(host: proxy.host, port: proxy.port) }
        return HTTPClient(
            eventLoopGroup: eventLoopGroup, configuration: configuration, backgroundActivityLogger: logger)
    }
}

/// Shuts AsyncHTTPClient clients down in the background and lets the owner wait for the shutdowns to end. A finished
/// shutdown forgets itself, so evicting clients for ever does not grow this.
private final class BackgroundClosers: Sendable {
    private let tasks = Locked<[Int: Task<Void, Never>]>([:])
    private let counter = Atomic<Int>(0)

    func close(_ client: HTTPClient, logger: Logger) {
        let id = counter.add(1, ordering: .relaxed).newValue
        tasks.withLock { tasks in
            // The task removes itself under the same lock, so it cannot do so before it is recorded.
            tasks[id] = Task { [self] in
                // The caller may have had the whole answer of the client's last exchange while AsyncHTTPClient is
                // still giving that connection back to its pool, in a callback queued on the connection's loop (a
                // request end written after the response ended). A shutdown that closes the connection first makes
                // that late return trip a precondition in AsyncHTTPClient's pool ("a connection that we don't know
                // was released"), which crashed the test runner twice. Letting each loop of the client's group run
                // once first lets those callbacks run before the close.
                for loop in client.eventLoopGroup.makeIterator() { try? await loop.submit {}.get() }
                do { try await client.shutdown() } catch { logger.debug("pinned client shutdown: \(error)") }
                _ = self.tasks.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// Shutdowns still running.
    var pending: Int { tasks.withLock { $0.count } }

    func waitForAll() async {
        while true {
            let pending = tasks.withLock { tasks in
                defer { tasks.removeAll() }
                return Array(tasks.values)
            }
            if pending.isEmpty { return }
            for task in pending { await task.value }
        }
    }
}
