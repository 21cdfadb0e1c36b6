import HTTPDNS
import NIOCore

/// Reports each connect gRPC makes for a target back into the resolver's scores: the TCP connect time on success,
/// a failure when the connect is refused or times out, and the time to the server's first bytes (what a slow
/// path adds beyond the handshake), so an address that fails for gRPC sinks for every user of the resolver.
///
/// It sits first in the connection's pipeline (added by the transport's `onCreateTCPConnection` callback, before
/// the connect), where it sees the outbound connect and the raw inbound bytes. Used only on its channel's event loop.
final class ConnectReporter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private let resolver: HostResolver
    private let host: HostName
    private var started: NIODeadline?
    private var address: IPAddress?
    private var sawFirstBytes = false

    init(resolver: HostResolver, host: HostName) {
        self.resolver = resolver
        self.host = host
    }

    func connect(context: ChannelHandlerContext, to address: SocketAddress, promise: EventLoopPromise<Void>?) {
        guard let text = address.ipAddress, let ip = IPAddress(text) else {
            context.connect(to: address, promise: promise)
            return
        }
        let started = NIODeadline.now()
        self.started = started
        self.address = ip
        let promise = promise ?? context.eventLoop.makePromise()
        let (resolver, host) = (self.resolver, self.host)
        promise.futureResult.whenComplete { result in
            switch result {
            case .success:
                resolver.reportConnect(to: ip, of: host, latency: Self.elapsed(since: started))
            case .failure(let error):
                // A channel closed before its connect ended (the client shutting down) says nothing of the address.
                if let error = error as? ChannelError, error == .ioOnClosedChannel || error == .alreadyClosed {
                    return
                }
                resolver.reportFailure(to: ip, of: host)
            }
        }
        context.connect(to: address, promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !sawFirstBytes, let started, let address {
            sawFirstBytes = true
            resolver.reportFirstByte(to: address, of: host, latency: Self.elapsed(since: started))
        }
        context.fireChannelRead(data)
    }

    private static func elapsed(since started: NIODeadline) -> Duration {
        .nanoseconds((NIODeadline.now() - started).nanoseconds)
    }
}
