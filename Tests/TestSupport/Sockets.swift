public import HTTPDNS

#if canImport(Glibc)
    import Glibc
#endif

/// Finds free loopback ports.
public enum FreePort {
    /// A UDP port on 127.0.0.1 that was free a moment ago.
    public static func udp() throws -> UInt16 {
        let socket = try BoundUDPSocket()
        defer { socket.close() }
        return socket.port
    }

    /// A port on 127.0.0.1 that was free for both UDP and TCP a moment ago, for a DNS server that binds both.
    public static func udpAndTCP() throws -> UInt16 {
        for _ in 0..<20 {
            let socket = try BoundUDPSocket()
            defer { socket.close() }
            if isFreeForTCP(socket.port) { return socket.port }
        }
        throw TestServerError("no port free for both UDP and TCP in 20 tries")
    }

    /// Whether a TCP socket can bind 127.0.0.1:`port` now.
    private static func isFreeForTCP(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago.
    public static func tcp() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestServerError("socket() failed: errno \(errno)") }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw TestServerError("bind() failed: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Polls until something accepts TCP connections on `ip:port`, every 50 ms for up to 10 s.
    public static func waitUntilAccepting(ip: String = "127.0.0.1", port: UInt16, while alive: () -> Bool) -> Bool {
        for _ in 0..<200 {
            guard alive() else { return false }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return false }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr(ip)
            address.sin_port = port.bigEndian
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            Glibc.close(fd)
            if connected { return true }
            usleep(50_000)
        }
        return false
    }
}

/// A UDP socket bound to 127.0.0.1 on a free port that answers nothing unless told to: a DNS server that stalls.
public final class BoundUDPSocket: Sendable {
    private let fd: Int32
    /// The bound port.
    public let port: UInt16

    /// The socket's address as a DNS server address.
    public var address: ServerAddress { ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: port) }

    /// Binds a new socket.
    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestServerError("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(fd)
            throw TestServerError("bind() failed: errno \(errno)")
        }
        self.fd = fd
        self.port = UInt16(bigEndian: address.sin_port)
    }

    /// Answers one query by hand: reads queries until one asks for `name`, and replies to it with a single A
    /// record (`ipv4`, TTL 60). Other queries are read and dropped. A test can so hold a query for as long as it
    /// likes and then release it, instead of relying on a timeout racing the test's own progress.
    /// - Throws: ``TestServerError`` when no query for `name` arrives within `timeout`.
    public func answer(_ name: String, withIPv4 ipv4: [UInt8], within timeout: Duration = .seconds(30)) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let (message, source) = receive(within: deadline - ContinuousClock.now) else { break }
            guard message.count > 12, let (asked, questionEnd) = Self.question(in: message[...]),
                asked.lowercased() == name.lowercased()
            else { continue }
            // ID, then QR RD RA and NOERROR, one question, one answer; the question as asked; the answer's name
            // as a pointer to the question's (offset 12), A IN, TTL 60, four bytes of address.
            let reply =
                Array(message[0..<2]) + [0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]
                + Array(message[12..<questionEnd])
                + [0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4] + ipv4
            guard send(reply, to: source) else { throw TestServerError("sendto() failed: errno \(errno)") }
            return
        }
        throw TestServerError("no query for \(name) arrived within \(timeout)")
    }

    /// Waits up to `timeout` for one datagram and returns it with its source port on 127.0.0.1 (for a fake upstream
    /// that answers, or forges, by hand); `nil` when none came.
    public func receive(within timeout: Duration) -> (message: [UInt8], source: UInt16)? {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 20) == 1 else { continue }
            var source = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let count = withUnsafeMutablePointer(to: &source) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, &buffer, buffer.count, 0, $0, &length)
                }
            }
            if count > 0 { return (Array(buffer[0..<count]), UInt16(bigEndian: source.sin_port)) }
        }
        return nil
    }

    /// Sends `message` from this socket to `port` on 127.0.0.1; `false` when the system call failed.
    @discardableResult
    public func send(_ message: [UInt8], to port: UInt16) -> Bool {
        var destination = sockaddr_in()
        destination.sin_family = sa_family_t(AF_INET)
        destination.sin_addr.s_addr = inet_addr("127.0.0.1")
        destination.sin_port = port.bigEndian
        let sent = withUnsafePointer(to: &destination) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, message, message.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return sent == message.count
    }

    /// Reads queries for `duration` without answering any, and returns their question names in arrival order
    /// (a retried query appears once per datagram).
    public func questions(during duration: Duration) -> [String] {
        let deadline = ContinuousClock.now + duration
        var names: [String] = []
        var buffer = [UInt8](repeating: 0, count: 1_500)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 20) == 1 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 12, let (name, _) = Self.question(in: buffer[..<count]) { names.append(name.lowercased()) }
        }
        return names
    }

    /// The question name of a query, and where its question (name, type, class) ends.
    public static func question(in message: ArraySlice<UInt8>) -> (String, Int)? {
        var labels: [String] = []
        var offset = message.startIndex + 12
        while offset < message.endIndex {
            let length = Int(message[offset])
            if length == 0 {
                let end = offset + 5
                return end <= message.endIndex ? (labels.joined(separator: "."), end) : nil
            }
            guard length < 64, offset + 1 + length <= message.endIndex else { return nil }
            labels.append(String(decoding: message[(offset + 1)..<(offset + 1 + length)], as: UTF8.self))
            offset += 1 + length
        }
        return nil
    }

    /// Closes the socket; later datagrams get ICMP port unreachable.
    public func close() { Glibc.close(fd) }
}

/// Sends a raw DNS query to check that a server is up.
enum DNSProbe {
    /// Polls `server` with an `A ready.test` query every 50 ms for up to 5 s.
    static func waitUntilAnswering(_ server: ServerAddress, while alive: () -> Bool) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = server.port.bigEndian
        // Header: id 0x1234, RD, one question; then "ready.test" A IN.
        let query: [UInt8] =
            [0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
            + [5] + Array("ready".utf8) + [4] + Array("test".utf8) + [0, 0, 1, 0, 1]
        for _ in 0..<100 {
            guard alive() else { return false }
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, query, query.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if sent == query.count {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&poller, 1, 50) == 1 {
                    var buffer = [UInt8](repeating: 0, count: 512)
                    if recv(fd, &buffer, buffer.count, 0) > 0 { return true }
                }
            } else {
                usleep(50_000)
            }
        }
        return false
    }
}

/// A TCP socket listening on one loopback address, so a host can have several real IPs (Linux routes all of
/// 127.0.0.0/8 to loopback). The kernel completes handshakes into the backlog; nothing is ever accepted, which is
/// all a connect probe needs.
public final class TCPListener: Sendable {
    private let fd: Int32
    /// The address listened on.
    public let ip: String
    /// The port listened on.
    public let port: UInt16

    /// Listens on `ip:port`; port 0 picks a free one.
    ///
    /// With `listening: false` the port is only bound, without `SO_REUSEADDR`: connects to it are refused, and no
    /// other socket can bind it while this one holds it. That is the dependable way to get a refused port; closing
    /// a listener frees its port for whatever binds next.
    public init(ip: String, port: UInt16 = 0, listening: Bool = true) throws {
        let (fd, address) = try boundTCPSocket(ip: ip, port: port, backlog: listening ? 128 : nil)
        self.fd = fd
        self.ip = ip
        self.port = UInt16(bigEndian: address.sin_port)
    }

    /// Stops listening; later connects are refused.
    public func close() { Glibc.close(fd) }
}

/// A loopback address whose port drops connection attempts, like a blackholed route: a listener with the smallest
/// backlog, filled by connections that are never accepted, so the kernel drops further SYNs and a connect hangs
/// until its timeout. (On loopback nothing else loses packets.)
public final class BlackholeListener: Sendable {
    private let listener: Int32
    private let fillers: [Int32]
    /// The address.
    public let ip: String
    /// The port.
    public let port: UInt16

    /// Blackholes `ip:port`; port 0 picks a free one.
    public init(ip: String, port: UInt16 = 0) throws {
        let (fd, bound) = try boundTCPSocket(ip: ip, port: port, backlog: 0)
        var address = bound
        var fillers: [Int32] = []
        for _ in 0..<3 {
            let filler = socket(
                AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
            guard filler >= 0 else { continue }
            _ = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            fillers.append(filler)
        }
        usleep(100_000)  // let the handshakes of the fillers complete into the backlog
        self.listener = fd
        self.fillers = fillers
        self.ip = ip
        self.port = UInt16(bigEndian: address.sin_port)
    }

    /// Releases the address.
    public func close() {
        for filler in fillers { Glibc.close(filler) }
        Glibc.close(listener)
    }
}

/// A TCP socket bound to `ip:port` (port 0 picks one), listening with `backlog` unless it is `nil`, close-on-exec;
/// `SO_REUSEADDR` only for listeners (a bound-only socket must keep others off its port). Returns the descriptor and
/// the bound address.
func boundTCPSocket(ip: String, port: UInt16, backlog: Int32?) throws -> (Int32, sockaddr_in) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw TestServerError("socket() failed: errno \(errno)") }
    if backlog != nil {
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr(ip)
    address.sin_port = port.bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(fd, raw, length) == 0 && (backlog.map { listen(fd, $0) == 0 } ?? true)
                && getsockname(fd, raw, &length) == 0
        }
    }
    guard bound else {
        let code = errno
        Glibc.close(fd)
        throw TestServerError("bind/listen on \(ip):\(port) failed: errno \(code)")
    }
    return (fd, address)
}

/// Plain TCP connections to 127.0.0.1, for tests that speak a protocol byte by byte.
public enum LoopbackTCP {
    /// Connects to 127.0.0.1:`port`, from `source` (another loopback address) when given; reads on the returned
    /// descriptor give up after `receiveTimeout`, sends after `sendTimeout` when given. `receiveBuffer` shrinks the
    /// kernel's receive buffer (set before connecting, so the advertised window is small too), for clients that do
    /// not read. The caller closes it.
    public static func connect(
        port: Int, receiveTimeout: Duration, from source: String? = nil, receiveBuffer: Int32? = nil,
        sendTimeout: Duration? = nil
    ) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestServerError("socket: \(errno)") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let sendTimeout {
            var timeout = timeval(
                tv_sec: Int(sendTimeout.components.seconds),
                tv_usec: Int(sendTimeout.components.attoseconds / 1_000_000_000_000))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                close(fd)
                throw TestServerError("bind to \(source): \(errno)")
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw TestServerError("connect to 127.0.0.1:\(port): \(errno)")
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }
}
