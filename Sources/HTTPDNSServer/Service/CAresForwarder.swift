public import HTTPDNS
package import Logging

/// Forwards DNS messages of other types (MX, TXT, SRV, HTTPS, …) through c-ares to its servers, with c-ares's
/// timeouts, retries and server rotation.
public struct CAresForwarder: DNSMessageForwarder {
    /// The resolver whose channel carries the messages.
    public let resolver: CAresResolver

    /// Forwards through `resolver`.
    public init(resolver: CAresResolver) {
        self.resolver = resolver
    }

    /// Sends `query` and returns the upstream's answer (its ID is c-ares's; the service puts the client's back).
    public func forward(_ query: [UInt8]) async throws -> [UInt8] {
        try await resolver.send(message: query)
    }
}

/// A ``CAresForwarder`` whose c-ares channel follows the settings: a reload that changes `cares.*` (its servers,
/// timeouts, tries) gives the relayed types a channel of the new settings, as the resolver's own lookups get one, so
/// no query of any type goes on to a server the operator removed. Queries in flight finish on the channel they
/// started on, which shuts down once the last of them is done (a `CAresResolver` stops its thread when released).
package final class ReloadingCAresForwarder: DNSMessageForwarder {
    private let current: Locked<(configuration: CAresResolver.Configuration, resolver: CAresResolver)>
    private let logger: Logger

    /// A forwarder with a channel of `configuration`.
    /// - Throws: `HTTPDNSError` when c-ares cannot start with it.
    package init(configuration: CAresResolver.Configuration, logger: Logger) throws {
        self.logger = logger
        current = Locked((configuration, try CAresResolver(configuration: configuration, logger: logger)))
    }

    /// Moves to a channel of `configuration` if it differs from the one in use.
    /// - Throws: `HTTPDNSError` when c-ares cannot start with it (the channel in use stays).
    package func apply(_ configuration: CAresResolver.Configuration) throws {
        guard current.withLock({ $0.configuration != configuration }) else { return }
        let resolver = try CAresResolver(configuration: configuration, logger: logger)
        current.withLock { $0 = (configuration, resolver) }
    }

    /// Sends `query` on the channel of the settings in force.
    package func forward(_ query: [UInt8]) async throws -> [UInt8] {
        try await current.withLock { $0.resolver }.send(message: query)
    }

    /// Stops the channel in use: queries still in flight fail with `HTTPDNSError.Code.shutdown`.
    package func shutdown() {
        current.withLock { $0.resolver }.shutdown()
    }
}
