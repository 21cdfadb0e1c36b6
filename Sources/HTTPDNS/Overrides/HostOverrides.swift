import Synchronization
public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

extension ResolutionSource {
    /// An address from the overrides: a hosts file or ``HostOverrides/set(_:for:)``.
    public static let override: ResolutionSource = "override"
    /// An address from the system hosts file (`/etc/hosts`), the pipeline's `hosts` layer.
    public static let hosts: ResolutionSource = "hosts"
}

/// The override layer: names whose addresses are fixed by configuration, in the spirit of /etc/hosts and
/// NSEtcHosts, but per application and with wildcards.
///
/// Two tables are kept: the one loaded from the overrides file (replaced on reload) and the one set at run time
/// with ``set(_:for:)``, which wins. Safe to use from any thread; a change is seen by the next lookup.
///
/// ```swift
/// let overrides = HostOverrides(file: try HostsFile(contentsOf: "Config/hosts"))
/// overrides.set([IPAddress("192.0.2.44")!], for: try HostPattern("api.example.com"))
/// let answer = overrides.resolve(try HostName("api.example.com"), family: .any)
/// ```
public final class HostOverrides: Sendable {
    private struct State {
        var file: OverrideTable
        var runtime: OverrideTable
    }

    private let state: Locked<State>
    private let changes = Atomic<UInt64>(0)
    /// The TTL given to overridden addresses (default 60 s): how long a cache may keep them after a reload.
    let ttl: UInt32
    /// The source answers carry: `ResolutionSource.override`, or `ResolutionSource.hosts` for the layer that
    /// reads the system hosts file.
    let source: ResolutionSource

    /// Creates the layer with the entries of an overrides file (`nil`: none; run-time overrides only).
    public convenience init(file: HostsFile? = nil, ttl: UInt32 = 60, source: ResolutionSource = .override) {
        self.init(table: file?.table ?? OverrideTable(), ttl: ttl, source: source)
    }

    /// Creates the layer with a table built already.
    init(table: OverrideTable, ttl: UInt32 = 60, source: ResolutionSource = .override) {
        self.state = Locked(State(file: table, runtime: OverrideTable()))
        self.ttl = ttl
        self.source = source
    }

    /// Gives `pattern` exactly these addresses at run time, over anything the file says. An empty list removes it.
    public func set(_ addresses: [IPAddress], for pattern: HostPattern) {
        state.withLock { $0.runtime.set(addresses, for: pattern) }
        changes.add(1, ordering: .releasing)
    }

    /// Removes a run-time override; the file's entry for the name, if any, applies again.
    public func remove(_ pattern: HostPattern) {
        state.withLock { $0.runtime.set([], for: pattern) }
        changes.add(1, ordering: .releasing)
    }

    /// Replaces the file's entries (after an edit of the file); run-time overrides stay.
    public func replaceFile(_ file: HostsFile) {
        replaceFileTable(file.table)
    }

    /// Replaces the file's table (on reload); run-time overrides stay.
    func replaceFileTable(_ table: OverrideTable) {
        state.withLock { $0.file = table }
        changes.add(1, ordering: .releasing)
    }

    /// A number that grows with every change of the tables (see ``HostCache/generation``).
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// The file's table and the run-time table.
    var tables: (file: OverrideTable, runtime: OverrideTable) {
        state.withLock { ($0.file, $0.runtime) }
    }

    /// The override for `name`: a run-time one first, then the file's (exact names before wildcards).
    @_spi(Benchmarks) public func lookup(_ name: HostName) -> OverrideMatch? {
        state.withLock { state in state.runtime.lookup(name) ?? state.file.lookup(name) }
    }

    /// Whether `name` is overridden, at run time or by the file.
    package func contains(_ name: HostName) -> Bool { lookup(name) != nil }

    /// The overridden addresses of `host` for `family`, IPv4 first, with this layer's source
    /// (`ResolutionSource.override`, or `ResolutionSource.hosts` for the system hosts file).
    /// - Returns: `nil` when `host` is not overridden or has no address of `family` (the next layer answers then).
    public func resolve(_ host: HostName, family: AddressFamily) -> Resolution? {
        guard let match = lookup(host) else { return nil }
        let v4 = family == .ipv6 ? [] : match.addresses.filter { $0.family == .ipv4 }
        let v6 = family == .ipv4 ? [] : match.addresses.filter { $0.family == .ipv6 }
        let addresses = (v4 + v6).map { ResolvedAddress(ip: $0, ttl: ttl, source: source) }
        return addresses.isEmpty ? nil : Resolution(host: host.name, addresses: addresses)
    }
}
