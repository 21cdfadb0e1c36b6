import Foundation
package import Logging
import Synchronization
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The scored IP cache: per host and asked family, the addresses with their TTL and source, ranked by measured
/// connect latency and failures.
///
/// Lookups take a mutex and a dictionary probe; rankings are computed when answers or scores change, not on
/// lookups. Entries past their TTL are served as stale up to ``Configuration/maximumStaleness``; NXDOMAIN and no
/// data are cached for ``Configuration/negativeTTL``; beyond ``Configuration/maximumHosts`` hosts are evicted
/// about least recently used first (the oldest stored goes, unless used since: then it gets one second chance). A
/// resolver with a cache file (``HostResolver/Configuration/cachePath``) persists it across restarts.
///
/// A cache is given to a ``HostResolver``, which stores its upstreams' answers in it and ranks them by what the
/// fronts (and ``HostResolver/reportConnect(to:of:latency:)``) report:
///
/// ```swift
/// let resolver = HostResolver(upstreams: [.init(name: "cares", kind: .cares, resolver: cares)],
///                             cache: HostCache(configuration: .init(minimumTTL: 30, dualStack: .fastest)))
/// ```
public final class HostCache: Sendable {
    /// The cache's limits and policies.
    public struct Configuration: Sendable, Hashable {
        /// TTLs below this (seconds) are raised to it.
        public var minimumTTL: UInt32
        /// TTLs above this (seconds) are lowered to it.
        public var maximumTTL: UInt32
        /// How long NXDOMAIN and no-data answers are cached, in seconds; 0 turns negative caching off.
        public var negativeTTL: UInt32
        /// How long past its TTL an answer may still be served.
        public var maximumStaleness: Duration
        /// The most hosts kept; beyond it, about the least recently used are evicted first (a second-chance queue).
        public var maximumHosts: Int
        /// How the two families are ordered in answers to `any` lookups.
        public var dualStack: DualStackPolicy
        /// How measurements become scores.
        var scoring: ScoringPolicy = .default
        /// Fresh hits after which an answer counts as hot and is refreshed shortly before it expires.
        var hotHits: Int = 2
        /// The longest lead before expiry at which a hot answer is refreshed (the lead is a tenth of the TTL,
        /// at most this).
        var maximumRefreshLead: Duration = .seconds(30)
        /// After a failed refresh, the time before another is tried.
        var refreshRetryInterval: Duration = .seconds(5)
        /// How long a started refresh blocks others (it normally ends, and unblocks, much sooner).
        var refreshClaimDuration: Duration = .seconds(60)
        /// The most background refreshes (of hot answers before they expire, of stale answers being served) started
        /// in a second, with a burst of as many; past it a refresh is put off (by `refreshRetryInterval`), so a
        /// flood of names cannot turn into a flood of upstream queries.
        public var maximumRefreshesPerSecond: Int

        /// Creates a configuration; the defaults match `Config/hostsctl.json`.
        public init(
            minimumTTL: UInt32 = 30,
            maximumTTL: UInt32 = 86_400,
            negativeTTL: UInt32 = 30,
            maximumStaleness: Duration = .seconds(86_400),
            maximumHosts: Int = 10_000,
            dualStack: DualStackPolicy = .fastest,
            maximumRefreshesPerSecond: Int = 100
        ) {
            self.maximumRefreshesPerSecond = max(maximumRefreshesPerSecond, 1)
            self.minimumTTL = minimumTTL
            self.maximumTTL = max(maximumTTL, minimumTTL)
            self.negativeTTL = negativeTTL
            self.maximumStaleness = maximumStaleness
            self.maximumHosts = max(maximumHosts, 1)
            self.dualStack = dualStack
        }

        /// The defaults.
        package static let `default` = Configuration()

        func clamp(_ ttl: UInt32) -> UInt32 { min(max(ttl, minimumTTL), maximumTTL) }

        /// How long before expiry a hot answer is refreshed: a tenth of its TTL, at most ``maximumRefreshLead``.
        func refreshLead(ttl: UInt32) -> Duration {
            .seconds(fractional: min(Double(ttl) / 10, maximumRefreshLead.fractionalSeconds))
        }
    }

    /// One cached answer, as `hostsctl cache show` lists it.
    package struct Entry: Sendable, Hashable {
        /// The host.
        package var host: String
        /// The family that was asked for.
        package var family: AddressFamily
        /// The addresses, ranked (empty for a negative answer).
        package var addresses: [RankedAddress]
        /// Where the answer came from.
        package var origin: ResolutionSource
        /// The (clamped) TTL the answer was stored with, in seconds.
        package var ttl: UInt32
        /// Seconds until it expires; negative when it is stale.
        package var remainingSeconds: Double
        /// The error of a negative answer.
        package var error: HTTPDNSError.Code?
    }

    /// What loading a persisted cache did.
    package struct LoadReport: Sendable, Hashable {
        /// Answers added to the cache.
        package var loaded: Int
        /// Answers skipped: malformed, or past the maximum staleness.
        package var dropped: Int
        /// Why the whole file was ignored (missing files are not a problem and give `nil`).
        package var problem: String?
    }

    private let core: Locked<HostCacheCore>
    private let clock: CacheClock
    private let changes = Atomic<UInt64>(0)

    /// A number that grows with every change of what lookups of any name return: the configuration, a file
    /// loaded, every answer marked for refresh or every negative one removed (lookups themselves do not count). A
    /// change of one host's answers or scores counts in ``names`` instead. A caller that keeps a copy of an answer
    /// for the `steadyFor` of its hit reads both before the lookup and uses the copy only while both are unchanged.
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// A counter per host (shared by a hash) that grows with every change of that host's answers or scores: stored,
    /// removed, a connect or a failure recorded. A store of one host so leaves the kept copies of every other one.
    package let names = NameVersions()

    /// Runs `body` under the lock and counts the change in ``generation`` once it is visible.
    private func change<T>(_ body: (inout sending HostCacheCore) -> sending T) -> sending T {
        defer { changes.add(1, ordering: .releasing) }
        return core.withLock(body)
    }

    /// Runs `body`, a change of `host`'s answers or scores only, under the lock and counts it in ``names`` once it
    /// is visible. A store that makes room evicts another host without counting it: a copy of that host's answer
    /// is still the answer it had, and lives at most its `steadyFor` (a second at most).
    private func change<T>(of host: HostName, _ body: (inout sending HostCacheCore) -> sending T) -> sending T {
        defer { names.changed(host.name) }
        return core.withLock(body)
    }
    /// The cache's configuration.
    package var configuration: Configuration { core.withLock { $0.configuration } }

    /// Creates an empty cache.
    /// - Parameter configuration: Limits and policies.
    public convenience init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, clock: .system)
    }

    /// Creates an empty cache that reads `clock` for expiry (tests pass one they control).
    init(configuration: Configuration = .default, clock: CacheClock) {
        self.clock = clock
        self.core = Locked(HostCacheCore(configuration: configuration))
    }

    /// Replaces the limits and policies (a settings reload); entries stay. New TTL bounds apply to answers stored
    /// from now on, the dual-stack policy and scoring to the next ranking, a lower host limit at the next store.
    func updateConfiguration(_ configuration: Configuration) {
        change { $0.configuration = configuration }
    }

    /// The number of hosts held.
    @usableFromInline package var count: Int { core.withLock { $0.count } }

    /// The best address of `host` if it has a fresh answer for `family`: the fast path for callers that connect.
    @usableFromInline package func bestAddress(for host: HostName, family: AddressFamily = .any) -> IPAddress? {
        let now = clock.now()
        return core.withLock { $0.bestAddress(host, family: family, now: now) }
    }

    /// The answer for `host` and `family`: fresh or stale (see ``RankedResolution/freshness``), or `nil`.
    /// Unlike the host resolver, this never starts a refresh.
    func resolution(for host: HostName, family: AddressFamily = .any) -> RankedResolution? {
        let now = clock.now()
        return core.withLock { $0.fallback(host, family: family, now: now) }
    }

    /// The ranked addresses of `host` for `family` (fresh or stale), best first; empty when nothing is cached.
    package func rankedAddresses(for host: HostName, family: AddressFamily = .any) -> [RankedAddress] {
        let now = clock.now()
        return core.withLock { $0.ranked(host, family: family, now: now) }
    }

    /// Whether `ip` is one of the addresses the cache holds for `host` (answers and overrides).
    func knows(_ ip: IPAddress, of host: HostName) -> Bool {
        core.withLock { $0.records[host]?.record.knownAddresses.contains(ip) ?? false }
    }

    /// Looks up `host`, counting the hit and claiming a refresh when one is due.
    func lookup(_ host: HostName, family: AddressFamily, probeInterval: Duration? = nil) -> HostCacheCore.Lookup {
        let now = clock.now()
        return core.withLock { $0.lookup(host, family: family, now: now, probeInterval: probeInterval) }
    }

    /// Stores a positive answer and returns it ranked.
    /// - Parameters:
    ///   - host: The host the answer is for.
    ///   - family: The family that was asked for.
    ///   - addresses: The addresses answered (duplicates are dropped).
    ///   - ttl: The answer's TTL in seconds, clamped to the configured bounds.
    ///   - origin: Where the answer came from.
    ///   - upstream: The identity of the upstream that answered (`HostResolver.Upstream`'s identity, e.g. `cares(127.0.0.1:5353)`).
    ///   - merge: Add the addresses to those already cached instead of replacing them (a raced source that lost).
    /// - Returns: The stored answer, ranked; `nil` (and nothing stored) when `addresses` is empty.
    @discardableResult
    @usableFromInline package func store(
        _ host: HostName,
        family: AddressFamily,
        addresses: [IPAddress],
        ttl: UInt32,
        origin: ResolutionSource,
        upstream: String? = nil,
        merge: Bool = false
    ) -> RankedResolution? {
        guard !addresses.isEmpty else { return nil }
        let now = clock.now()
        return change(of: host) {
            $0.store(
                host, family: family, addresses: addresses, ttl: ttl, origin: origin, upstream: upstream, merge: merge,
                now: now)
        }
    }

    /// Caches an NXDOMAIN or no-data error for the negative TTL; any other error is ignored.
    func storeNegative(_ host: HostName, family: AddressFamily, error: HTTPDNSError) {
        let now = clock.now()
        change(of: host) { $0.storeNegative(host, family: family, error: error, now: now) }
    }

    /// A positive answer within the maximum staleness, fresh or stale, without claiming anything: what is served
    /// when every source fails.
    func fallback(_ host: HostName, family: AddressFamily) -> RankedResolution? {
        let now = clock.now()
        return core.withLock { $0.fallback(host, family: family, now: now) }
    }

    /// A background refresh failed; the next is tried after ``Configuration/refreshRetryInterval``.
    func refreshFailed(_ host: HostName, family: AddressFamily) {
        let now = clock.now()
        core.withLock { $0.refreshFailed(host, family: family, now: now) }
    }

    /// Feedback: a TCP connect (a probe, a connection race) to `ip` of `host` succeeded after `latency`. The
    /// latency enters the address's moving average of connect times, half its failure penalty is forgiven and any
    /// back-off ends.
    func recordConnect(to ip: IPAddress, of host: HostName, latency: Duration) {
        let now = clock.now()
        change(of: host) { $0.recordSuccess(host, ip: ip, latency: latency, now: now) }
    }

    /// Passive feedback: a request to `ip` of `host` got its first response byte after `latency`. Kept apart from
    /// connect times (it includes the server's own work); the address answered, so its back-off ends and half its
    /// penalty is forgiven.
    func recordFirstByte(to ip: IPAddress, of host: HostName, latency: Duration) {
        let now = clock.now()
        change(of: host) { $0.recordFirstByte(host, ip: ip, latency: latency, now: now) }
    }

    /// Ranks addresses that come from outside the cache (overrides, a hosts file) for `host` by the scores kept
    /// for them, so they get the same treatment as cached answers: feedback, back-off, probes. `port` is the port
    /// callers connect to (probes measure it); a probe round is claimed when `probeInterval` is set and one is due.
    /// Not a change of ``generation``: it ranks by scores that are there, and cached answers stay as they are.
    func rankExternal(
        _ host: HostName, family: AddressFamily, addresses: [IPAddress], port: Int?, probeInterval: Duration?
    ) -> (ranked: [RankedAddress], probe: HostCacheCore.ProbeRequest?) {
        let now = clock.now()
        return core.withLock {
            $0.rankExternal(
                host, family: family, addresses: addresses, port: port, probeInterval: probeInterval, now: now)
        }
    }

    /// Passive feedback: connecting to `ip` of `host` failed. The address gets a penalty that decays over time.
    func recordFailure(to ip: IPAddress, of host: HostName) {
        let now = clock.now()
        change(of: host) { $0.recordFailure(host, ip: ip, now: now) }
    }

    /// Claims a probe round for `host` if none ran within `interval`.
    func claimProbe(_ host: HostName, interval: Duration) -> HostCacheCore.ProbeRequest? {
        let now = clock.now()
        return core.withLock { $0.claimProbe(host, interval: interval, now: now) }
    }

    /// Remembers the port connections to `host` use, so its probes measure that port.
    func setProbePort(_ port: Int, for host: HostName) {
        core.withLock { $0.setProbePort(port, for: host) }
    }

    /// Forgets every cached NXDOMAIN and no-data answer, for example when the upstreams that gave them change.
    func removeNegativeAnswers() {
        change { $0.removeNegativeAnswers() }
    }

    /// Removes every answer that hands out an address `isGuarded` says no upstream may give: what a resolver whose
    /// guard covers every upstream does with a cache file written without that guard.
    func removeAnswers(handingOut isGuarded: (IPAddress) -> Bool) {
        change { $0.removeAnswers(handingOut: isGuarded) }
    }

    /// After a network change: every answer is due for refresh (and served stale until refreshed), and
    /// measurements are forgotten so addresses are probed again.
    func markAllForRefresh() {
        let now = clock.now()
        change { $0.markAllForRefresh(now: now) }
    }

    /// After a move to the network `key` (``HostCacheCore/switchNetwork(to:now:)``): scores kept per network, the
    /// new network's (or none) in place, every answer due for refresh.
    func switchNetwork(to key: String) {
        let now = clock.now()
        change { $0.switchNetwork(to: key, now: now) }
    }

    /// Removes `host`.
    package func remove(_ host: HostName) {
        change(of: host) { $0.remove(host) }
    }

    /// Removes every host `matches` names, with its answers (negative ones too) and scores; returns how many.
    package func remove(where matches: (HostName) -> Bool) -> Int {
        change { $0.removeHosts(where: matches) }
    }

    /// Empties the cache.
    func removeAll() {
        change { $0.removeAll() }
    }

    /// Every cached answer, most recently used host first.
    package func entries() -> [Entry] {
        let now = clock.now()
        return core.withLock { $0.snapshot(now: now) }
    }

    /// Saves positive answers and scores to `path` atomically (temporary file, then rename, then the directory
    /// flushed), holding an advisory lock on `path.lock`. Hosts that another process saved to the file since and
    /// that this cache does not hold are kept (up to the host limit), unless this cache removed them on purpose or
    /// was cleared; the least recently used hosts are left out if the file would exceed the size the reader
    /// accepts (64 MiB).
    /// - Throws: `HTTPDNSError.Code.fileError` when the file cannot be written.
    package func save(to path: String) throws(HTTPDNSError) {
        let now = clock.now()
        let saved = clock.moment()
        let (file, maximumHosts, removed, cleared) = core.withLock { core in
            (
                core.exported(now: now, saved: saved), core.configuration.maximumHosts, core.removedSinceSave,
                core.clearedSinceSave
            )
        }
        try CacheFile.withLock(on: path) { () throws(HTTPDNSError) in
            // Another process may have saved since this one loaded: keep its hosts that this cache does not hold
            // (except those removed or cleared here on purpose), rather than losing them.
            var merged = file
            if !cleared, let current = try? CacheFile.read(from: path) {
                var theirs = current
                theirs.hosts.removeAll { removed.contains($0.name) }
                merged = file.merging(theirs, maximumHosts: maximumHosts)
            }
            try merged.write(to: path)
        }
        core.withLock { core in
            core.removedSinceSave.subtract(removed)
            if cleared { core.clearedSinceSave = false }
        }
    }

    /// Loads a persisted cache. Hosts already cached keep their answers; answers past the maximum staleness are
    /// dropped. A missing file loads nothing; a corrupt, truncated, oversized or foreign file is ignored with a
    /// warning on `logger`, never a crash.
    @discardableResult
    package func load(
        from path: String, logger: Logger = Logger(label: "swift-httpdns", factory: { _ in SwiftLogNoOpLogHandler() })
    ) -> LoadReport {
        guard FileManager.default.fileExists(atPath: path) else {
            return LoadReport(loaded: 0, dropped: 0, problem: nil)
        }
        let file: CacheFile
        do {
            file = try CacheFile.read(from: path)
        } catch {
            logger.warning("ignoring the persisted cache", metadata: ["path": "\(path)", "reason": "\(error.message)"])
            return LoadReport(loaded: 0, dropped: 0, problem: error.message)
        }
        let now = clock.now()
        let moment = clock.moment()
        let (loaded, dropped) = change { $0.load(file, now: now, at: moment) }
        logger.debug(
            "loaded the persisted cache",
            metadata: ["path": "\(path)", "answers": "\(loaded)", "dropped": "\(dropped)"])
        return LoadReport(loaded: loaded, dropped: dropped, problem: nil)
    }

    /// The default cache file: `$XDG_CACHE_HOME/hostsctl/cache.json`, else `$HOME/.cache/hostsctl/cache.json`;
    /// `nil` when neither variable is set.
    public static func defaultPath(environment: [String: String]? = nil) -> String? {
        let environment = environment ?? ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/hostsctl/cache.json" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.cache/hostsctl/cache.json" }
        return nil
    }
}
