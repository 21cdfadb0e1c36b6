package import NIOCore
import NIOPosix
package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The outcome of one TCP connect.
package enum ProbeOutcome: Sendable, Hashable {
    /// The connection was established after this long (and closed at once, unless it was dialled to be kept).
    case connected(Duration)
    /// The connect failed: refused, unreachable or timed out.
    case failed(HTTPDNSError.Code)

    /// Whether the connect succeeded.
    var isSuccess: Bool {
        if case .connected = self { return true }
        return false
    }
}

/// Something that measures how long a TCP connect to an address takes.
package protocol ConnectProber: Sendable {
    /// Connects to `ip` on `port`, measures the time to the established connection, and closes it.
    /// - Parameters:
    ///   - timeout: The connect is abandoned (as `HTTPDNSError.Code.timeout`) after this long.
    func probe(_ ip: IPAddress, port: Int, timeout: Duration) async -> ProbeOutcome

    /// Connects to `ip` on `port` as ``probe(_:port:timeout:)`` does, but keeps an established connection for the
    /// caller instead of closing it. A prober that cannot keep connections returns none (the default).
    func dial(_ ip: IPAddress, port: Int, timeout: Duration) async -> (ProbeOutcome, DialedConnection?)
}

extension ConnectProber {
    /// Probes, and keeps nothing.
    func dial(_ ip: IPAddress, port: Int, timeout: Duration) async -> (ProbeOutcome, DialedConnection?) {
        (await probe(ip, port: port, timeout: timeout), nil)
    }
}

/// A TCP connection a connect established and kept for one request: handed over once with ``take()``, closed when
/// nobody took it (``close()``, or when the last reference goes).
package final class DialedConnection: Sendable {
    /// The address connected to.
    package let address: IPAddress
    private let channel: Locked<(any Channel)?>

    init(address: IPAddress, channel: any Channel) {
        self.address = address
        self.channel = Locked(channel)
    }

    deinit { close() }

    /// The connection, to the first caller; `nil` after that (or after ``close()``).
    package func take() -> (any Channel)? {
        channel.withLock { channel in
            defer { channel = nil }
            return channel
        }
    }

    /// Closes the connection unless it was taken.
    package func close() {
        take()?.close(promise: nil)
    }
}

/// Measures TCP connect times with SwiftNIO: a non-blocking connect on an event loop, closed as soon as it is
/// established (or kept, by ``dial(_:port:timeout:)``). Nothing is sent.
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
        let (outcome, connection) = await dial(ip, port: port, timeout: timeout)
        if let channel = connection?.take() { try? await channel.close() }
        return outcome
    }

    /// Connects once, reports the time it took, and keeps the connection.
    package func dial(_ ip: IPAddress, port: Int, timeout: Duration) async -> (ProbeOutcome, DialedConnection?) {
        guard (1...65_535).contains(port) else { return (.failed(.badQuery), nil) }
        let address: SocketAddress
        do {
            address = try SocketAddress(ipAddress: ip.description, port: port)
        } catch {
            return (.failed(.badQuery), nil)
        }
        let clock = ContinuousClock()
        let start = clock.now
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.nanoseconds(timeout.wholeNanoseconds))
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            // A kept connection carries a request (as AsyncHTTPClient's connections do, without Nagle's delay).
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
        let connect = bootstrap.connect(to: address)
        do {
            let channel = try await withTaskCancellationHandler {
                try await connect.get()
            } onCancel: {
                // The connect future cannot be cancelled; a connected channel is closed when it completes.
                connect.whenSuccess { $0.close(promise: nil) }
            }
            return (.connected(clock.now - start), DialedConnection(address: ip, channel: channel))
        } catch let error as ChannelError {
            if case .connectTimeout = error { return (.failed(.timeout), nil) }
            return (.failed(.connectionFailed), nil)
        } catch {
            return (.failed(.connectionFailed), nil)
        }
    }
}
