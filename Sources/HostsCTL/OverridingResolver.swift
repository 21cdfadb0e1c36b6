import HTTPDNS

/// Answers overridden names from the overrides and everything else from `upstream`.
struct OverridingResolver<Upstream: HostNameResolver>: HostNameResolver {
    var overrides: HostOverrides?
    var upstream: Upstream

    func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        if let answer = overrides?.resolve(host, family: family) { return answer }
        return try await upstream.resolve(host, family: family)
    }
}
