package import Foundation
import HTTPDNS

/// The proxies the environment configures, decided with libcurl's rules, which this platform's URLSession (over
/// libcurl) follows: `http_proxy` (lower case only), `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY`, and
/// `no_proxy`/`NO_PROXY` (a comma- or space-separated list: `*` for every host, a name matching itself and every
/// name under it with or without a leading dot, IP addresses and CIDR ranges).
///
/// ```swift
/// let proxies = ProxyEnvironment(environment: ["https_proxy": "http://127.0.0.1:3128", "no_proxy": ".internal"])
/// proxies.proxy(for: URL(string: "https://api.example.com/")!)   // 127.0.0.1:3128
/// proxies.proxy(for: URL(string: "https://db.internal/")!)       // nil
/// ```
package struct ProxyEnvironment: Sendable, Hashable {
    /// A proxy server.
    package struct Proxy: Sendable, Hashable, CustomStringConvertible {
        /// `http` for an HTTP proxy (CONNECT tunnels), or another scheme such as `socks5`.
        var scheme: String
        /// The proxy's host name or address.
        var host: String
        /// The proxy's port (libcurl's default is 1080).
        var port: Int

        /// Creates a proxy description.
        package init(scheme: String, host: String, port: Int) {
            self.scheme = scheme
            self.host = host
            self.port = port
        }

        /// `scheme://host:port`.
        package var description: String { "\(scheme)://\(host):\(port)" }
    }

    /// The proxy for `http` URLs.
    package var http: Proxy?
    /// The proxy for `https` URLs.
    package var https: Proxy?
    /// The proxy for any scheme without its own.
    package var all: Proxy?
    /// The `no_proxy` entries, lower case, without leading dots.
    var exceptions: [String]

    /// Reads the variables from `environment` (`nil`: the process's).
    package init(environment: [String: String]? = nil) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        }
        // libcurl ignores HTTP_PROXY in upper case (a CGI program gets the client's "Proxy:" header under that name).
        http = value("http_proxy").flatMap(Self.parse)
        https = value("https_proxy", "HTTPS_PROXY").flatMap(Self.parse)
        all = value("all_proxy", "ALL_PROXY").flatMap(Self.parse)
        exceptions = (value("no_proxy", "NO_PROXY") ?? "")
            .split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
            .map { entry in
                var text = entry.lowercased()
                while text.hasPrefix(".") { text.removeFirst() }
                if text.hasPrefix("["), let end = text.firstIndex(of: "]") {
                    text = String(text[text.index(after: text.startIndex)..<end]) + text[text.index(after: end)...]
                }
                return text
            }
            .filter { !$0.isEmpty }
    }

    /// Whether no proxy is configured at all.
    package var isEmpty: Bool { http == nil && https == nil && all == nil }

    /// The proxy libcurl would send a request for `url` through, or `nil` for a direct connection.
    package func proxy(for url: URL) -> Proxy? {
        guard !isEmpty, let scheme = url.scheme?.lowercased(), let host = RequestRewriting.host(of: url) else {
            return nil
        }
        let chosen = (scheme == "https" ? https : scheme == "http" ? http : nil) ?? all
        guard let chosen, !isExcepted(host.lowercased()) else { return nil }
        return chosen
    }

    /// Whether `host` (lower case, IPv6 without brackets) matches a `no_proxy` entry.
    func isExcepted(_ host: String) -> Bool {
        let address = IPAddress(host)
        for entry in exceptions {
            if entry == "*" { return true }
            if let address {
                if Self.address(address, matches: entry) { return true }
                continue
            }
            if host == entry || (host.hasSuffix(entry) && host.dropLast(entry.count).hasSuffix(".")) { return true }
        }
        return false
    }

    private static func address(_ address: IPAddress, matches entry: String) -> Bool {
        let parts = entry.split(separator: "/", maxSplits: 1)
        guard let network = IPAddress(String(parts[0])), network.family == address.family else { return false }
        let width = address.family == .ipv4 ? 32 : 128
        guard let prefix = parts.count == 2 ? Int(parts[1]) : width, (0...width).contains(prefix) else { return false }
        let lhs = address.bytes, rhs = network.bytes
        var remaining = prefix
        for index in lhs.indices where remaining > 0 {
            let bits = min(remaining, 8)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if lhs[index] & mask != rhs[index] & mask { return false }
            remaining -= bits
        }
        return true
    }

    /// Reads `[scheme://][user:password@]host[:port][/]`; no scheme means `http`, no port means 1080.
    static func parse(_ text: String) -> Proxy? {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        var scheme = "http"
        if let range = rest.range(of: "://") {
            scheme = rest[..<range.lowerBound].lowercased()
            rest = rest[range.upperBound...]
        }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host = String(rest)
        var port = 1080
        if rest.hasPrefix("["), let end = rest.firstIndex(of: "]") {
            host = String(rest[rest.index(after: rest.startIndex)..<end])
            let after = rest[rest.index(after: end)...]
            if after.hasPrefix(":") { guard let value = Int(after.dropFirst()) else { return nil }; port = value }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            guard let value = Int(rest[rest.index(after: colon)...]) else { return nil }
            port = value
        }
        guard !host.isEmpty, (1...65_535).contains(port) else { return nil }
        return Proxy(scheme: scheme, host: host.lowercased(), port: port)
    }
}
