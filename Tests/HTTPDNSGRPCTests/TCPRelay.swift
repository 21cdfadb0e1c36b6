import Foundation
import Glibc
import HTTPDNS
import Synchronization
import TestSupport

/// A TCP relay on one loopback address that forwards every connection to a server elsewhere, and can die as a
/// process does: ``kill()`` stops listening and resets every connection at once (RST), which a server that is
/// shut down from inside the process does not do. One thread per direction, blocking sockets: a test tool.
final class TCPRelay: Sendable {
    let ip: String
    let port: Int
    private let target: Int
    private let listener: Int32
    private let sockets = Locked<Set<Int32>>([])
    private let dead = Atomic<Bool>(false)

    /// Listens on `ip:port` and forwards to `127.0.0.1:target`.
    init(ip: String, port: Int, target: Int) throws {
        self.ip = ip
        self.port = port
        self.target = target
        listener = try Self.socket(bindingTo: ip, port: port)
        guard listen(listener, 64) == 0 else { throw TestServerError("listen on \(ip):\(port): errno \(errno)") }
        Thread { [self] in acceptLoop() }.start()
    }

    /// Stops listening (later connects are refused) and resets every relayed connection.
    func kill() {
        guard !dead.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in sockets.withLock({ $0 }) {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            shutdown(fd, Int32(SHUT_RDWR))
        }
    }

    private func acceptLoop() {
        while !dead.load(ordering: .relaxed) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            guard let upstream = try? Self.connected(to: target) else {
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

    private static func address(_ ip: String, _ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(ip)
        return address
    }

    private static func socket(bindingTo ip: String, port: Int) throws -> Int32 {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = address(ip, port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            throw TestServerError("bind \(ip):\(port): errno \(errno)")
        }
        return fd
    }

    private static func connected(to port: Int) throws -> Int32 {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var address = address("127.0.0.1", port)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            close(fd)
            throw TestServerError("connect 127.0.0.1:\(port): errno \(errno)")
        }
        return fd
    }
}
