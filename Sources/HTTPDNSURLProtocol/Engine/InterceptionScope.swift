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

    /// Every host.
    public static var everyHost: InterceptionScope { InterceptionScope() }

    /// Whether `host` is inside the patterns (the IP-literal and `localhost` rule is not applied here).
    public func contains(_ host: HostName) -> Bool {
        if exclude.contains(where: { $0.matches(host) }) { return false }
        return include.isEmpty || include.contains(where: { $0.matches(host) })
    }

    /// Whether a request to the URL host `host` (brackets removed) is rewritten, given the resolver's overrides.
    public func intercepts(host: String, overrides: HostOverrides?) -> Bool {
        intercepts(host: host, name: try? HostName(host), overrides: overrides)
    }

    /// ``intercepts(host:overrides:)`` with `host` parsed already (`nil`: not a valid name).
    package func intercepts(host: String, name: HostName?, overrides: HostOverrides?) -> Bool {
        let isLiteral = IPAddress(host) != nil || name?.isLocalhost == true
        guard let name else { return false }
        if isLiteral {
            // Only an override gives a literal or localhost something to be rewritten to.
            guard let overrides, overrides.contains(name) else { return false }
        }
        return contains(name)
    }
}
