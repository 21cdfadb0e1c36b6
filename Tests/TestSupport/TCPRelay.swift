import Foundation
import Glibc
import HTTPDNS
import Synchronization

/// A TCP relay on one loopback address that forwards every connection to a server elsewhere, and can die as a
/// process does: ``kill()`` stops listening and resets every connection at once (RST), which a server that is
/// shut down from inside the process does not do. One thread per direction, blocking sockets: a test tool.
public final class TCPRelay: Sendable {
    /// The address listened on.
    public let ip: String
    /// The port listened on.
    public let port: Int
    private let target: Int
    private let listener: Int32
    private let sockets = Locked<Set<Int32>>([])
    private let dead = Atomic<Bool>(false)

    /// Listens on `ip:port` and forwards to `127.0.0.1:target`.
    public init(ip: String, port: Int, target: Int) throws {
        self.ip = ip
        self.port = port
        self.target = target
        listener = try boundTCPSocket(ip: ip, port: UInt16(port), backlog: 64).0
        Thread { [self] in acceptLoop() }.start()
    }

    /// Stops listening (later connects are refused) and resets every relayed connection.
    public func kill() {
        guard !dead.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        // Under the lock: a socket still in the set is still open (a connection leaves the set before it closes).
        sockets.withLock { sockets in
            for fd in sockets {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                shutdown(fd, Int32(SHUT_RDWR))
            }
        }
    }

    private func acceptLoop() {
        while !dead.load(ordering: .relaxed) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            // No receive timeout: a relayed connection may idle for as long as its peers like.
            guard let upstream = try? LoopbackTCP.connect(port: target, receiveTimeout: .zero) else {
                close(client)
                continue
            }
            sockets.withLock { $0.formUnion([client, upstream]) }
            let open = Atomic<Int>(2)
            let done: @Sendable () -> Void = { [self] in
                // The second direction to end closes both sockets.
                guard open.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
                sockets.withLock { $0.subtract([client, upstream]) }
                close(client)
                close(upstream)
            }
            Thread { [self] in
                pump(from: client, to: upstream)
                done()
            }.start()
            Thread { [self] in
                pump(from: upstream, to: client)
                done()
            }.start()
        }
    }

    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { send(destination, $0.baseAddress! + sent, count - sent, 0) }
                if written <= 0 { break }
                sent += written
            }
            if sent < count { break }
        }
        shutdown(destination, Int32(SHUT_WR))
    }
}
