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

/// Asks each layer in order and returns the first answer; when every layer fails, the first layer's error.
struct LayeredResolver: HostNameResolver {
    var layers: [any HostNameResolver]

    func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution {
        var firstError: (any Error)?
        for layer in layers {
            do {
                return try await layer.resolve(host, family: family)
            } catch let error as CancellationError {
                throw error
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        throw firstError ?? DNSError(code: .invalidConfiguration, message: "no resolution source is configured", host: host.name)
    }
}
