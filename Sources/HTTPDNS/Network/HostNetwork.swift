import Glibc
import Logging
import NIOPosix
import Synchronization
package import HTTPDNSCore

/// What this host's network can reach, applied to the answers the resolver hands out, as the system's resolver
/// does for the host's network without being asked.
///
/// On an IPv6-only host behind NAT64 (IPv6-only clusters, cloud subnets, mobile carriers) an HTTP DNS provider or
/// a DNS server outside the network answers only A records, which the host cannot reach. When the host has no IPv4
/// route, IPv4 addresses are unusable (RFC 6724 rule 1): native and DNS64 AAAA addresses come first, and an answer
/// with IPv4 addresses only is turned into IPv6 addresses under the network's NAT64 prefix (RFC 6052), found as
/// RFC 7050 says (AAAA of `ipv4only.arpa` through the system's resolver, checked against its well-known addresses)
/// or set by hand. Synthesized addresses carry ``RankedAddress/synthesizedFrom``; scores stay with the IPv4 address
/// the answer holds, so they survive the prefix changing.
///
/// A host with an IPv4 route (the common case) pays one atomic load and a coarse clock read per answer with IPv4
/// addresses; the route is checked again every 2 seconds (a UDP `connect`, which sends nothing).
public final class HostNetwork: Sendable {
    /// Whether IPv4-only answers are synthesized into NAT64 addresses.
    public enum NAT64Mode: String, Sendable, Hashable, CaseIterable {
        /// On a host without an IPv4 route, synthesize with the discovered (RFC 7050) or configured prefix.
        case auto
        /// Never synthesize: an IPv4-only answer on a host without an IPv4 route fails with
        /// `HTTPDNSError.Code.noRoute`.
        case off
    }

    /// A discovery's outcome and when it was made.
    private struct Discovery {
        var prefixes: [NAT64Prefix]
        var at: ContinuousClock.Instant
    }

    private struct State {
        var discovery: Discovery?
        var inFlight: Task<[NAT64Prefix], Never>?
        var discoveries = 0
    }

    let configuration: Configuration
    /// The coarse monotonic nanoseconds of the last route check.
    private let routeCheckedAt = Atomic<Int64>(Int64.min / 2)
    /// Whether the last check found an IPv4 route.
    private let hadIPv4Route = Atomic<Bool>(true)
    private let state = Locked(State())
    /// Answers the AAAA records of `ipv4only.arpa` (the system's resolver; tests give another).
    private let askWellKnownName: @Sendable () async -> [IPAddress]
    /// Whether this host routes IPv4 (tests give another).
    private let routesIPv4: @Sendable () -> Bool
    private let logger: Logger

    /// - Parameters:
    ///   - askWellKnownName: The AAAA query for discovery; by default `getaddrinfo` on NIO's blocking pool.
    ///   - routesIPv4: The route check; by default a UDP connect towards a documentation address.
    init(
        configuration: Configuration = .init(),
        logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() }),
        askWellKnownName: (@Sendable () async -> [IPAddress])? = nil,
        routesIPv4: (@Sendable () -> Bool)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.askWellKnownName = askWellKnownName ?? Self.askSystemResolver
        self.routesIPv4 = routesIPv4 ?? Self.hasIPv4Route
        // Checked now, so the first request does not pay for it.
        _ = hasIPv4Route
    }

    /// How many discoveries ran (for tests: the first request adds at most one).
    var discoveries: Int { state.withLock { $0.discoveries } }

    /// Forgets the route check and the discovered prefixes: the network changed.
    func networkChanged() {
        routeCheckedAt.store(Int64.min / 2, ordering: .relaxed)
        state.withLock {
            $0.discovery = nil
            $0.inFlight = nil
        }
    }

    /// Whether the host has an IPv4 route, checked at most every 2 seconds.
    var hasIPv4Route: Bool {
        let now = SuspendAwareMonotonic.now()
        if now &- routeCheckedAt.load(ordering: .relaxed) < 2_000_000_000 {
            return hadIPv4Route.load(ordering: .relaxed)
        }
        let routes = routesIPv4()
        hadIPv4Route.store(routes, ordering: .relaxed)
        routeCheckedAt.store(now, ordering: .relaxed)
        return routes
    }

    /// `answer` as this host can use it, when that needs no waiting: unchanged when it has no IPv4 address or the
    /// host routes IPv4 (nearly always); `nil` when a NAT64 discovery must run first (``adapted(_:)``).
    /// - Throws: `HTTPDNSError.Code.noRoute` when nothing in the answer is reachable and synthesis is off.
    func adaptedIfReady(_ answer: RankedResolution) throws(HTTPDNSError) -> RankedResolution? {
        guard answer.addresses.contains(where: { $0.ip.family == .ipv4 }), !hasIPv4Route else { return answer }
        let known = knownPrefixes()
        if answer.addresses.contains(where: { $0.ip.family == .ipv6 }) {
            return Self.preferringIPv6(answer, prefixes: known ?? [])
        }
        guard configuration.mode == .auto else { throw noRoute(answer, reason: "NAT64 synthesis is off (nat64.mode)") }
        guard let known else { return nil }
        return try synthesized(answer, prefixes: known)
    }

    /// `answer` as this host can use it, discovering the NAT64 prefix first when needed.
    /// - Throws: `HTTPDNSError.Code.noRoute` when nothing in the answer is reachable.
    func adapted(_ answer: RankedResolution) async throws(HTTPDNSError) -> RankedResolution {
        if let ready = try adaptedIfReady(answer) { return ready }
        return try synthesized(answer, prefixes: await discoveredPrefixes())
    }

    /// The address the cache knows for `ip`: the IPv4 address a synthesized one embeds, else `ip` (connect reports
    /// about a synthesized address score the answer's address).
    package func cacheAddress(for ip: IPAddress) -> IPAddress {
        guard ip.family == .ipv6 else { return ip }
        let prefixes = knownPrefixes(evenIfOld: true)
        for prefix in prefixes ?? [] {
            if let embedded = prefix.embedded(in: ip) { return embedded }
        }
        return ip
    }

    /// The address to dial for `ip` of the cache: through the NAT64 prefix when the host has no IPv4 route and a
    /// prefix is known, else `ip` (background probes measure the path requests take).
    func dialAddress(for ip: IPAddress) -> IPAddress {
        guard ip.family == .ipv4, configuration.mode == .auto, !hasIPv4Route else { return ip }
        let prefixes = knownPrefixes()
        return prefixes?.first?.synthesize(ip) ?? ip
    }

    /// The configured prefixes, else the discovered ones while current (or, `evenIfOld`, the last found); `nil`
    /// when none were discovered.
    private func knownPrefixes(evenIfOld: Bool = false) -> [NAT64Prefix]? {
        guard configuration.prefixes.isEmpty else { return configuration.prefixes }
        return state.withLock { evenIfOld ? $0.discovery?.prefixes : current($0) }
    }

    /// The discovered prefixes if still current.
    private func current(_ state: State) -> [NAT64Prefix]? {
        guard let discovery = state.discovery, ContinuousClock.now - discovery.at < configuration.discoveryLifetime
        else { return nil }
        return discovery.prefixes
    }

    /// The network's prefixes: discovered once (concurrent callers share the query), kept for a while.
    func discoveredPrefixes() async -> [NAT64Prefix] {
        if !configuration.prefixes.isEmpty { return configuration.prefixes }
        let (known, task) = state.withLock { state -> ([NAT64Prefix]?, Task<[NAT64Prefix], Never>?) in
            if let current = current(state) { return (current, nil) }
            if let running = state.inFlight { return (nil, running) }
            let (ask, logger) = (askWellKnownName, logger)
            let running = Task {
                let prefixes = NAT64Prefix.discovered(in: await ask())
                if prefixes.isEmpty {
                    logger.notice("no IPv4 route and no NAT64 prefix found (ipv4only.arpa has no DNS64 answer)")
                } else {
                    logger.info("NAT64 prefix discovered", metadata: ["prefixes": "\(prefixes.map(\.description))"])
                }
                return prefixes
            }
            state.inFlight = running
            state.discoveries += 1
            return (nil, running)
        }
        guard let task else { return known ?? [] }
        let prefixes = await task.value
        state.withLock { state in
            guard state.inFlight == task else { return }
            state.inFlight = nil
            state.discovery = Discovery(prefixes: prefixes, at: .now)
        }
        return prefixes
    }

    /// The answer with IPv4 addresses replaced by IPv6 ones under the first prefix, in the same order.
    private func synthesized(_ answer: RankedResolution, prefixes: [NAT64Prefix]) throws(HTTPDNSError)
        -> RankedResolution
    {
        guard let prefix = prefixes.first else {
            throw noRoute(
                answer, reason: "no NAT64 prefix was found (ipv4only.arpa has no DNS64 answer; nat64.prefixes)")
        }
        var adapted = answer
        adapted.addresses = answer.addresses.compactMap { address in
            guard let ip = prefix.synthesize(address.ip) else { return nil }
            var synthesized = address
            synthesized.ip = ip
            synthesized.synthesizedFrom = address.ip
            return synthesized
        }
        return adapted
    }

    /// The answer with its IPv6 addresses first (IPv4 is unusable: RFC 6724 rule 1), DNS64-synthesized ones marked.
    private static func preferringIPv6(_ answer: RankedResolution, prefixes: [NAT64Prefix]) -> RankedResolution {
        var adapted = answer
        var ipv6 = answer.addresses.filter { $0.ip.family == .ipv6 }
        for index in ipv6.indices {
            ipv6[index].synthesizedFrom = prefixes.lazy.compactMap { $0.embedded(in: ipv6[index].ip) }.first
        }
        adapted.addresses = ipv6 + answer.addresses.filter { $0.ip.family == .ipv4 }
        for index in adapted.addresses.indices { adapted.addresses[index].rank = index + 1 }
        return adapted
    }

    private func noRoute(_ answer: RankedResolution, reason: String) -> HTTPDNSError {
        let listed = answer.addresses.prefix(4).map(\.ip.description).joined(separator: ", ")
        return HTTPDNSError(
            code: .noRoute,
            message: "\(answer.host) has only IPv4 addresses (\(listed)) and this host has no IPv4 route; \(reason)",
            host: answer.host)
    }

    /// AAAA of `ipv4only.arpa` through `getaddrinfo`, on NIO's blocking pool.
    private static func askSystemResolver() async -> [IPAddress] {
        let name = try! HostName("ipv4only.arpa")
        let result = try? await NIOThreadPool.singleton.runIfActive { SystemResolver.lookup(name, family: .ipv6) }
        guard case .success(let resolution)? = result else { return [] }
        return resolution.addresses.map(\.ip).filter { $0.family == .ipv6 }
    }

    /// Whether the kernel has a route towards a global IPv4 address: a UDP socket's `connect`, which only looks the
    /// route up and sends nothing (the address is TEST-NET-2). Errors other than "unreachable" count as a route.
    private static func hasIPv4Route() -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return true }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(9).bigEndian
        address.sin_addr.s_addr = UInt32(198 << 24 | 51 << 16 | 100 << 8 | 1).bigEndian
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return status == 0 || (errno != ENETUNREACH && errno != EHOSTUNREACH)
    }
}
