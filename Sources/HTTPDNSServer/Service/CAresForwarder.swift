public import HTTPDNS
package import Logging
package import CoreMetrics
package import NIOCore
import NIOPosix

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

/// A forwarder whose upstream follows the settings: a reload that changes `cares.*` (its servers, timeouts, tries)
/// gives the relayed types an upstream of the new settings, as the resolver's own lookups get one, so no query of
/// any type goes on to a server the operator removed. Queries in flight finish on the upstream they started on,
/// which closes once the last of them is done (a `CAresResolver` stops its thread when released, a
/// `PlainDNSResolver` closes its sockets). With ``CAresResolver/Configuration/usesOwnSockets`` (as `hostsctl serve`
/// sets it) the queries leave on the server's own sockets (`PlainDNSClient`), else through c-ares.
package final class ReloadingCAresForwarder: DNSMessageForwarder {
    private typealias Upstream = (
        configuration: CAresResolver.Configuration, exchange: any DNSMessageExchange, stop: @Sendable () -> Void
    )
    private let current: Locked<Upstream>
    private let logger: Logger
    private let metricsFactory: any MetricsFactory
    private let servingGroup: (any EventLoopGroup)?

    /// A forwarder with an upstream of `configuration`; `metricsFactory` counts what its own sockets drop. With own
    /// sockets, the loops of `servingGroup` (NIO's shared group by default, which `hostsctl serve` listens on) send
    /// their relays themselves (``start(_:on:completion:)``).
    /// - Throws: `HTTPDNSError` when the upstream cannot start with it.
    package init(
        configuration: CAresResolver.Configuration, logger: Logger, metricsFactory: (any MetricsFactory)? = nil,
        servingGroup: (any EventLoopGroup)? = MultiThreadedEventLoopGroup.singleton
    ) throws {
        self.logger = logger
        self.metricsFactory = metricsFactory ?? MetricsSystem.factory
        self.servingGroup = servingGroup
        current = Locked(
            try Self.upstream(
                configuration, logger: logger, metricsFactory: self.metricsFactory, servingGroup: servingGroup))
    }

    private static func upstream(
        _ configuration: CAresResolver.Configuration, logger: Logger, metricsFactory: any MetricsFactory,
        servingGroup: (any EventLoopGroup)?
    ) throws -> Upstream {
        if let plain = try HostResolver.ownSockets(
            configuration, eventLoopGroup: PlainDNSClient.upstreamEventLoopGroup, servingGroup: servingGroup,
            logger: logger, metricsFactory: metricsFactory)
        {
            return (configuration, plain, { plain.shutdown() })
        }
        let cares = try CAresResolver(configuration: configuration, logger: logger)
        return (configuration, cares, { cares.shutdown() })
    }

    /// Moves to an upstream of `configuration` if it differs from the one in use.
    /// - Throws: `HTTPDNSError` when it cannot start with it (the upstream in use stays).
    package func apply(_ configuration: CAresResolver.Configuration) throws {
        guard current.withLock({ $0.configuration != configuration }) else { return }
        let upstream = try Self.upstream(
            configuration, logger: logger, metricsFactory: metricsFactory, servingGroup: servingGroup)
        current.withLock { $0 = upstream }
    }

    /// Sends `query` to the upstream of the settings in force.
    package func forward(_ query: [UInt8]) async throws -> [UInt8] {
        try await current.withLock { $0.exchange }.send(message: query)
    }

    /// Starts `query` from `loop`'s own sockets, the caller being on `loop`: `completion` runs there, once, with the
    /// answer (the query's ID and question) or the error ``forward(_:)`` would throw. Returns how to stop it (its
    /// asker went away); `nil`, with nothing started, when the upstream in force has no sockets on `loop` (c-ares,
    /// or a server started on another group): the caller forwards from a task.
    package func start(
        _ query: [UInt8], on loop: any EventLoop, completion: @escaping (Result<[UInt8], any Error>) -> Void
    ) -> (@Sendable () -> Void)? {
        guard let plain = current.withLock({ $0.exchange }) as? PlainDNSResolver else { return nil }
        let handle = PlainDNSQueryHandle()
        guard plain.client.start(message: query, on: loop, handle: handle, completion: completion) else { return nil }
        return { plain.cancel(handle, on: loop) }
    }

    /// Stops the upstream in use: queries still in flight fail with `HTTPDNSError.Code.shutdown`.
    package func shutdown() {
        current.withLock { $0.stop }()
    }
}
