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
        switch Self.split(text) {
        case .success(let (ip, port)):
            self.init(ip: ip, port: port ?? 53)
        case .failure(let reason):
            throw HTTPDNSError(
                code: .invalidServer,
                message:
                    "invalid DNS server '\(HostName.printable(text))': \(reason); expected IP[:PORT] or [IPv6]:PORT")
        }
    }

    /// Parses a listen address: `IP:PORT` or `[IPv6]:PORT`, the port required (a listener has no usual port to fall
    /// back on, and binding port 53 by surprise is worse than an error), an IP address rather than a host name.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` saying what is wrong.
    package init(listening text: some StringProtocol) throws(HTTPDNSError) {
        let text = String(text)
        if let problem = Self.listenProblem(text) {
            throw HTTPDNSError(code: .invalidConfiguration, message: "invalid listen address \(problem)")
        }
        guard case .success(let (ip, port?)) = Self.split(text) else { preconditionFailure("checked above") }
        self.init(ip: ip, port: port)
    }

    /// Why `text` is not a listen address (`'TEXT': reason; expected …`), `nil` when it is one.
    package static func listenProblem(_ text: String) -> String? {
        let expected = "expected IP:PORT or [IPv6]:PORT, e.g. 127.0.0.1:8053"
        switch split(text) {
        case .success((_, nil)):
            return "'\(HostName.printable(text))': the port is missing; \(expected)"
        case .success:
            return nil
        case .failure(let reason):
            var host = Substring(text)
            if let colon = text.lastIndex(of: ":"), !text.hasPrefix("[") { host = text[..<colon] }
            if IPAddress(host) == nil, (try? HostName(String(host))) != nil {
                return "'\(HostName.printable(text))': a listen address is an IP address, not a host name; \(expected)"
            }
            return "'\(HostName.printable(text))': \(reason); \(expected)"
        }
    }

    /// The address and the port (`nil` when not written) of `text`, or why it is neither.
    private static func split(_ text: String) -> Result<(IPAddress, UInt16?), SplitFailure> {
        var host = Substring(text)
        var port: UInt16?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return .failure(SplitFailure("missing ']'")) }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let value = UInt16(rest.dropFirst()), value > 0 else {
                    return .failure(SplitFailure("bad port"))
                }
                port = value
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            guard let value = UInt16(text[text.index(after: colon)...]), value > 0 else {
                return .failure(SplitFailure("bad port"))
            }
            port = value
        }
        guard let ip = IPAddress(host) else {
            return .failure(SplitFailure("'\(HostName.printable(String(host)))' is not an IP address"))
        }
        return .success((ip, port))
    }

    /// Why a text is not an address and port.
    private struct SplitFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// The canonical form: `IP:PORT` for IPv4 and `[IPv6]:PORT` for IPv6.
    public var description: String { "\(ip.urlHost):\(port)" }
}
