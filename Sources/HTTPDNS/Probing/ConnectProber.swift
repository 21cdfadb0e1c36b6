package import NIOCore
import NIOPosix
package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The outcome of one TCP connect.
package enum ProbeOutcome: Sendable, Hashable {
    /// The connection was established after this long (and closed at once).
    case connected(Duration)
    /// The connect failed: refused, unreachable or timed out.
    case failed(DNSError.Code)

    /// Whether the connect succeeded.
    package var isSuccess: Bool {
        if case .connected = self { return true }
        return false
    }
}

/// Something that measures how long a TCP connect to an address takes.
package protocol ConnectProber: Sendable {
    /// Connects to `ip` on `port`, measures the time to the established connection, and closes it.
    /// - Parameters:
    ///   - timeout: The connect is abandoned (as ``DNSError/Code/timeout``) after this long.
    func probe(_ ip: IPAddress, port: Int, timeout: Duration) async -> ProbeOutcome
}

/// Measures TCP connect times with SwiftNIO: a non-blocking connect on an event loop, closed as soon as it is
/// established. Nothing is sent.
package struct TCPConnectProber: ConnectProber {
    private let group: any EventLoopGroup

    /// Creates a prober on NIO's shared singleton event loop group.
    package init() {
        self.group = MultiThreadedEventLoopGroup.singleton
    }

    /// Creates a prober on `group`.
    package init(group: any EventLoopGroup) {
        self.group = group
    }

    /// Connects once and reports the time it took.
    package func probe(_ ip: IPAddress, port: Int, timeout: Duration) async -> ProbeOutcome {
        guard (1...65_535).contains(port) else { return .failed(.badQuery) }
        let address: SocketAddress
        do {
            address = try SocketAddress(ipAddress: ip.description, port: port)
        } catch {
            return .failed(.badQuery)
        }
        let clock = ContinuousClock()
        let start = clock.now
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.nanoseconds(timeout.wholeNanoseconds))
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
        let connect = bootstrap.connect(to: address)
        do {
            let channel = try await withTaskCancellationHandler {
                try await connect.get()
            } onCancel: {
                // The connect future cannot be cancelled; a connected channel is closed when it completes.
                connect.whenSuccess { $0.close(promise: nil) }
            }
            let elapsed = clock.now - start
            try? await channel.close()
            return .connected(elapsed)
        } catch let error as ChannelError {
            if case .connectTimeout = error { return .failed(.timeout) }
            return .failed(.connectionRefused)
        } catch {
            return .failed(.connectionRefused)
        }
    }
}
