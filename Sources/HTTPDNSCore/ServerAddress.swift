/// The address of a DNS server: an IP address and a UDP/TCP port.
///
/// Written as `IP`, `IP:PORT`, `[IPv6]` or `[IPv6]:PORT`; the port defaults to 53.
public struct ServerAddress: Hashable, Sendable, CustomStringConvertible {
    /// The server's IP address.
    public var ip: IPAddress
    /// The server's port.
    public var port: UInt16

    /// Creates a server address from its parts.
    public init(ip: IPAddress, port: UInt16 = 53) {
        self.ip = ip
        self.port = port
    }

    /// Parses `IP`, `IP:PORT`, `[IPv6]` or `[IPv6]:PORT`. A bare IPv6 address takes no port.
    /// - Throws: ``HTTPDNSError`` with code `invalidServer` when the text is not one of those forms.
    public init(parsing text: some StringProtocol) throws(HTTPDNSError) {
        let text = String(text)
        func fail(_ reason: String) -> HTTPDNSError {
            HTTPDNSError(
                code: .invalidServer,
                message:
                    "invalid DNS server '\(HostName.printable(text))': \(reason); expected IP[:PORT] or [IPv6]:PORT"
            )
        }
        var host = Substring(text)
        var port: UInt16 = 53
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw fail("missing ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = UInt16(rest.dropFirst()), value > 0 else {
                    throw fail("bad port")
                }
                port = value
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            guard let value = UInt16(text[text.index(after: colon)...]), value > 0 else { throw fail("bad port") }
            port = value
        }
        guard let ip = IPAddress(host) else { throw fail("'\(HostName.printable(String(host)))' is not an IP address") }
        self.init(ip: ip, port: port)
    }

    /// The canonical form: `IP:PORT` for IPv4 and `[IPv6]:PORT` for IPv6.
    public var description: String { "\(ip.urlHost):\(port)" }
}
