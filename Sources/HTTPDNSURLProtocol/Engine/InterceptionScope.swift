public import HTTPDNS

/// Which hosts the URL protocol rewrites: include and exclude patterns, as in the `interception.include` and
/// `interception.exclude` settings.
///
/// A host is in scope when no exclude pattern matches it and either the include list is empty or one of its
/// patterns matches. IP literals and `localhost` are never rewritten unless a host override names them: there is
/// nothing to resolve.
public struct InterceptionScope: Sendable, Hashable {
    /// Patterns of hosts to rewrite; empty means every host.
    public var include: [HostPattern]
    /// Patterns of hosts never to rewrite; they win over ``include``.
    public var exclude: [HostPattern]

    /// Creates a scope; the default rewrites every host.
    public init(include: [HostPattern] = [], exclude: [HostPattern] = []) {
        self.include = include
        self.exclude = exclude
    }

    /// Whether `host` is inside the patterns (the IP-literal and `localhost` rule is not applied here).
    func contains(_ host: HostName) -> Bool {
        if exclude.contains(where: { $0.matches(host) }) { return false }
        return include.isEmpty || include.contains(where: { $0.matches(host) })
    }

    /// Whether a request to the URL host `host` (brackets removed) is rewritten, given the resolver's overrides.
    func intercepts(host: String, overrides: HostOverrides?) -> Bool {
        let name = try? HostName(host)
        return intercepts(
            name: name, isLiteral: IPAddress(host) != nil || name?.isLocalhost == true, overrides: overrides)
    }

    /// ``intercepts(host:overrides:)`` for a hop's target, read from its URL once.
    func intercepts(_ target: HopTarget, overrides: HostOverrides?) -> Bool {
        intercepts(name: try? target.name.get(), isLiteral: target.isLiteral, overrides: overrides)
    }

    /// ``intercepts(host:overrides:)`` with the host parsed already (`name` nil: not a valid name).
    private func intercepts(name: HostName?, isLiteral: Bool, overrides: HostOverrides?) -> Bool {
        guard let name else { return false }
        if isLiteral {
            // Only an override gives a literal or localhost something to be rewritten to.
            guard let overrides, overrides.contains(name) else { return false }
        }
        return contains(name)
    }
}
