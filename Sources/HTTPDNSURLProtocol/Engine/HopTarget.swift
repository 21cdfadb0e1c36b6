import Foundation
import HTTPDNS
import HTTPDNSCore

/// Where one hop goes, read from its URL once and handed as it is to the scope check, the candidates, the spans and
/// the trace: the host as the URL writes it (brackets removed), that host parsed as a name, whether it is an IP
/// literal or `localhost`, the port, and the `Host` header that names the origin.
struct HopTarget: Sendable {
    /// The URL host, brackets removed.
    let host: String
    /// `host` parsed (the failure when it is not a valid host name, e.g. an IPv6 literal).
    let name: Result<HostName, HTTPDNSError>
    /// An IP literal or `localhost`: nothing to resolve unless an override names it.
    let isLiteral: Bool
    /// The URL's port, or the scheme's (443 for https, 80 otherwise).
    let port: Int
    /// `host[:port]`, as the `Host` header names the origin (the port only when the URL has one).
    let hostHeader: String

    /// The target of `url`; `nil` when it has no host. `host`, when given, is the URL's host read already.
    init?(_ url: URL, host: String? = nil) {
        guard let host = host ?? url.host, !host.isEmpty else { return nil }
        self.host = host
        name = Result { () throws(HTTPDNSError) in try HostName(host) }
        let parsedName = try? name.get()
        isLiteral = parsedName?.isLocalhost == true || IPAddress(host) != nil
        let explicitPort = url.port
        port = explicitPort ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        let literal = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        hostHeader = explicitPort.map { "\(literal):\($0)" } ?? literal
    }
}
