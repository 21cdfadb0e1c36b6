import Foundation
import HTTPDNS

/// The client addresses a proxy wrote into a request: `X-Forwarded-For: client, proxy1, proxy2` and RFC 7239
/// `Forwarded: for=client;proto=https, for="[2001:db8::1]:4711"`. Each hop is an address, or `nil` where the header
/// holds something else (an obfuscated or `unknown` node, a name, garbage): the walk from the right stops there.
enum ForwardedHeader {
    /// The most hops read from one header (a longer one is cut to its last hops, the ones trusted proxies wrote).
    static let maximumHops = 32

    /// The hops of an `X-Forwarded-For` value, first (the original client) to last.
    static func xForwardedFor(_ value: String) -> [IPAddress?] {
        value.split(separator: ",").suffix(maximumHops).map { address(String($0)) }
    }

    /// The `for=` hops of a `Forwarded` value, first to last; an element without `for=` is a hop that names no
    /// address.
    static func rfc7239(_ value: String) -> [IPAddress?] {
        value.split(separator: ",").suffix(maximumHops).map { element in
            for pair in element.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2,
                    parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "for"
                else { continue }
                var node = parts[1].trimmingCharacters(in: .whitespaces)
                if node.hasPrefix("\""), node.hasSuffix("\""), node.count >= 2 {
                    node = String(node.dropFirst().dropLast())
                }
                return address(node)
            }
            return nil
        }
    }

    /// An address as proxies write it: bare, `[IPv6]`, `[IPv6]:port` or `IPv4:port`.
    private static func address(_ text: String) -> IPAddress? {
        let node = text.trimmingCharacters(in: .whitespaces)
        if node.hasPrefix("[") {
            guard let close = node.firstIndex(of: "]") else { return nil }
            return IPAddress(node[node.index(after: node.startIndex)..<close])
        }
        if let address = IPAddress(node) { return address }
        // IPv4 with a port: exactly one colon.
        let parts = node.split(separator: ":")
        guard parts.count == 2, parts[0].contains(".") else { return nil }
        return IPAddress(parts[0])
    }
}
