import Foundation
public import HTTPDNSCore

/// An HTTP DNS server: its base URL and the fixed IP addresses it is reached through.
///
/// The endpoint's own name is never resolved through HTTP DNS (that would be circular). When the bootstrap
/// addresses (``init(_:bootstrapAddresses:)``) are not empty, connections go to those addresses in turn, while the TLS
/// handshake still sends the URL's host name as SNI and checks the certificate against it. Without bootstrap
/// addresses a host name is resolved by the system resolver; an IP literal host is used as it is.
public struct HTTPDNSEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// `https` or `http`.
    enum Scheme: String, Sendable, Hashable {
        /// HTTP over TLS; the default.
        case https
        /// Plain HTTP; only when a URL says `http://` explicitly.
        case http

        var defaultPort: Int { self == .https ? 443 : 80 }
    }

    /// The scheme.
    let scheme: Scheme
    /// The host name or IP literal of the URL, lowercased, IPv6 without brackets.
    let host: String
    /// The TCP port.
    let port: Int
    /// The path of the URL without a trailing slash (may be empty), e.g. `/dns-query`.
    let path: String
    /// The addresses to connect to instead of resolving the URL's host; tried in order.
    let bootstrapAddresses: [IPAddress]
    /// `address:port` for each bootstrap address, or `host:port` without them: the servers a request is sent to,
    /// as errors and answers name them (made once, not per request).
    let servers: [String]
    /// The address each of ``servers`` connects to (`nil`: the host, resolved by the system), in the same order.
    let targets: [IPAddress?]
    /// Whether the host is an IP literal (read on every exchange, so decided once).
    let hostIsIPAddress: Bool

    /// Parses an endpoint.
    ///
    /// - Parameters:
    ///   - url: `https://host[:port][/path]` or, explicitly, `http://…`. A URL without a scheme gets `https://`.
    ///     User names, passwords, query strings and fragments are rejected.
    ///   - bootstrapAddresses: Fixed addresses for the host; not allowed when the host is an IP literal.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming what is wrong.
    public init(_ url: String, bootstrapAddresses: [IPAddress] = []) throws(HTTPDNSError) {
        func invalid(_ reason: String) -> HTTPDNSError {
            HTTPDNSError(
                code: .invalidConfiguration, message: "HTTP DNS endpoint \(HostName.printable(url)): \(reason)")
        }
        var text = url.trimmingCharacters(in: .whitespaces)
        if !text.contains("://") { text = "https://" + text }
        guard let components = URLComponents(string: text) else { throw invalid("not a URL") }
        guard let schemeText = components.scheme?.lowercased(), let scheme = Scheme(rawValue: schemeText) else {
            throw invalid("the scheme must be https or http")
        }
        guard components.user == nil, components.password == nil else {
            throw invalid("credentials do not belong in the URL")
        }
        guard components.query == nil, components.fragment == nil else {
            throw invalid("the URL must not have a query or fragment")
        }
        guard var host = components.host?.lowercased(), !host.isEmpty else { throw invalid("the URL has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let isLiteral = IPAddress(host) != nil
        if !isLiteral {
            do { host = try HostName(host).name } catch { throw invalid("the host is not a valid name") }
        }
        if isLiteral, !bootstrapAddresses.isEmpty {
            throw invalid("bootstrap addresses are for endpoints with a host name, not an IP address")
        }
        let port = components.port ?? scheme.defaultPort
        guard (1...65535).contains(port) else { throw invalid("port \(port) is out of range") }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.bootstrapAddresses = bootstrapAddresses
        self.hostIsIPAddress = isLiteral
        self.targets = bootstrapAddresses.isEmpty ? [nil] : bootstrapAddresses
        self.servers =
            bootstrapAddresses.isEmpty
            ? ["\(host):\(port)"] : bootstrapAddresses.map { "\($0.urlHost):\(port)" }
    }

    /// The base URL: `scheme://host[:port]path`.
    package var url: String {
        let hostPart = IPAddress(host)?.urlHost ?? host
        let portPart = port == scheme.defaultPort ? "" : ":\(port)"
        return "\(scheme.rawValue)://\(hostPart)\(portPart)\(path)"
    }

    /// The base URL, followed by the bootstrap addresses if there are any.
    public var description: String {
        bootstrapAddresses.isEmpty ? url : "\(url) via \(bootstrapAddresses.map(\.description).joined(separator: ","))"
    }
}
