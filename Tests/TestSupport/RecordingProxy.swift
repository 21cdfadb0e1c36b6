import Foundation
import Glibc
import HTTPDNS
import Synchronization

/// A forward HTTP proxy on a loopback address that records every request it receives: absolute-form requests
/// (`GET http://host:port/path`, what libcurl sends for plain http through a proxy) are forwarded, and `CONNECT
/// host:port` opens a tunnel. Names are resolved from `routes` (the proxy does the resolving, as real proxies do);
/// anything else must be an IPv4 literal. One thread per connection, blocking sockets: a test tool, not a server.
public final class RecordingProxy: Sendable {
    private let listener: Int32
    /// The address listened on.
    public let ip: String
    /// The port listened on.
    public let port: UInt16
    private let routes: [String: String]
    private let log = Locked<[String]>([])
    private let closed = Atomic<Bool>(false)

    /// Listens on `ip` at a free port; `routes` maps host names to the IPv4 addresses the proxy connects to.
    public init(ip: String = "127.0.0.1", routes: [String: String] = [:]) throws {
        let (fd, address) = try boundTCPSocket(ip: ip, port: 0, backlog: 64)
        listener = fd
        self.ip = ip
        self.port = UInt16(bigEndian: address.sin_port)
        self.routes = routes
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// `http://ip:port`, the value for `http_proxy`.
    public var url: String { "http://\(ip):\(port)" }

    /// The request lines received so far (`GET http://api.test:8080/ HTTP/1.1`, `CONNECT api.test:8443 HTTP/1.1`).
    public var requests: [String] { log.withLock { $0 } }

    /// Stops accepting; open tunnels end when their peers close.
    public func stop() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while !closed.load(ordering: .relaxed) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        guard let (head, rest) = Self.readHead(client) else { return }
        let lines = head.components(separatedBy: "\r\n")
        guard let requestLine = lines.first else { return }
        log.withLock { $0.append(requestLine) }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3 else { return }
        if parts[0] == "CONNECT" {
            guard let upstream = connectTo(String(parts[1])) else {
                Self.send(client, Array("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n".utf8))
                return
            }
            defer { close(upstream) }
            Self.send(client, Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8))
            if !rest.isEmpty { Self.send(upstream, rest) }
            relay(client, upstream)
            return
        }
        guard let url = URL(string: String(parts[1])), let host = url.host else { return }
        guard let upstream = connectTo("\(host):\(url.port ?? 80)") else {
            Self.send(client, Array("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n".utf8))
            return
        }
        defer { close(upstream) }
        var path = url.path.isEmpty ? "/" : url.path
        if let query = url.query { path += "?\(query)" }
        var forwarded = ["\(parts[0]) \(path) \(parts[2])"]
        for line in lines.dropFirst() where !line.isEmpty {
            let name = line.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
            if name.hasPrefix("proxy-") || name == "connection" || name == "keep-alive" { continue }
            forwarded.append(line)
        }
        forwarded.append("Connection: close")
        Self.send(upstream, Array((forwarded.joined(separator: "\r\n") + "\r\n\r\n").utf8) + rest)
        relay(client, upstream)
    }

    /// Copies bytes both ways until either side closes.
    private func relay(_ a: Int32, _ b: Int32) {
        let done = Atomic<Bool>(false)
        let other = Thread {
            Self.pump(from: b, to: a)
            done.store(true, ordering: .relaxed)
            shutdown(a, Int32(SHUT_RDWR))
        }
        other.start()
        Self.pump(from: a, to: b)
        shutdown(b, Int32(SHUT_WR))
        while !done.load(ordering: .relaxed) { usleep(1000) }
    }

    private static func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return }
            send(destination, Array(buffer[0..<count]))
        }
    }

    private func connectTo(_ authority: String) -> Int32? {
        guard let colon = authority.lastIndex(of: ":"), let port = UInt16(authority[authority.index(after: colon)...])
        else { return nil }
        let host = String(authority[..<colon])
        let ip = routes[host] ?? host
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, ip, &address.sin_addr) == 1 else {
            close(fd)
            return nil
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }

    private static func readHead(_ fd: Int32) -> (String, [UInt8])? {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count < 65_536 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            data += buffer[0..<count]
            if let end = data.firstRange(of: Array("\r\n\r\n".utf8)) {
                return (String(decoding: data[..<end.lowerBound], as: UTF8.self), Array(data[end.upperBound...]))
            }
        }
        return nil
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return }
            offset += sent
        }
    }
}
