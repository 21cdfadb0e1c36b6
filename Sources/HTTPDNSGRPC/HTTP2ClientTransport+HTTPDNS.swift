public import GRPCCore
public import GRPCNIOTransportHTTP2Posix
public import HTTPDNS
public import Logging
public import NIOCore
public import NIOPosix

extension HTTP2ClientTransport.Posix.Config {
    /// This configuration with every connection reporting its connect outcome for `host` into `resolver`'s
    /// scores (connect time, failure, time to the server's first bytes); a callback already set still runs.
    public func reportingConnects(of host: String, to resolver: HostResolver) -> Self {
        guard let name = try? HostName(host) else { return self }
        var config = self
        let previous = channelDebuggingCallbacks.onCreateTCPConnection
        config.channelDebuggingCallbacks.onCreateTCPConnection = { channel in
            let added = channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(
                    ConnectReporter(resolver: resolver, host: name), position: .first)
            }
            guard let previous else { return added }
            return added.flatMap { previous(channel) }
        }
        return config
    }
}

extension ClientTransport where Self == HTTP2ClientTransport.Posix {
    /// An HTTP/2 transport to `host:port` whose addresses come from `resolver`, in its ranking, with every
    /// connect's outcome reported back into its scores: the one line that puts a `GRPCClient` on HTTPDNS.
    ///
    /// ```swift
    /// try await withGRPCClient(
    ///     transport: .httpdns(host: "api.example.com", port: 443, resolver: resolver, transportSecurity: .tls)
    /// ) { client in ... }
    /// ```
    /// TLS sends `host` as SNI and checks the certificate for it. The resolver's default registry (`dns:`, `ipv4:`,
    /// ...) stays available beside the HTTPDNS factory.
    /// - Throws: When the transport cannot be made (a TLS configuration NIOSSL rejects).
    public static func httpdns(
        host: String,
        port: Int = 443,
        resolver: HostResolver,
        transportSecurity: HTTP2ClientTransport.Posix.TransportSecurity,
        configuration: NameResolvers.HTTPDNS.Configuration = NameResolvers.HTTPDNS.Configuration(),
        config: HTTP2ClientTransport.Posix.Config = .defaults,
        logger: Logger = Logger(label: "httpdns.grpc", factory: { _ in SwiftLogNoOpLogHandler() }),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> Self {
        var registry = NameResolverRegistry.defaults
        registry.registerFactory(
            NameResolvers.HTTPDNS(resolver: resolver, configuration: configuration, logger: logger))
        return try HTTP2ClientTransport.Posix(
            target: .httpdns(host: host, port: port),
            transportSecurity: transportSecurity,
            config: config.reportingConnects(of: host, to: resolver),
            resolverRegistry: registry,
            serviceConfig: configuration.serviceConfig,
            eventLoopGroup: eventLoopGroup)
    }
}
