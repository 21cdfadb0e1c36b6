import Foundation
import HTTPDNS

/// Who may talk to the admin listener from a browser: DNS rebinding defences for the operator's endpoints, which
/// have no authentication (docs/serving.md has the operator reach them through `ssh -L` or a private network).
///
/// A page of `rebind.attacker.example` that the operator opens while a tunnel runs can make its name resolve to
/// 127.0.0.1 and read the admin listener as if it were its own origin; its requests then carry its own name in
/// `Host`. So a request is answered only when `Host` names a loopback literal (`127.0.0.0/8`, `[::1]`), `localhost`,
/// the listen address itself, or one of the operator's configured names (any port: a tunnel may map another one);
/// else it gets 421 Misdirected Request. A request without `Host` (HTTP/1.0 tools) is answered. `/stats.json`, which
/// holds the fleet's busiest names and per-network steering, also refuses a browser's cross-site fetch
/// (`Sec-Fetch-Site: cross-site` or `same-site`: 403), and the control calls refuse whatever a web page sends
/// (``allowsControl(method:origin:fetchSite:control:)``).
struct AdminOrigin: Sendable {
    /// The admin listener's own address.
    var listen: IPAddress?
    /// Names the operator reaches the admin listener by (`serve.admin.hostNames`), lower case.
    var names: Set<String>

    init(listen: IPAddress?, names: [String]) {
        self.listen = listen
        self.names = Set(names.map { HostName.asciiLowercased($0).trimmingTrailingDot })
    }

    /// Whether a request with this `Host` header may be answered.
    func allows(host header: String?) -> Bool {
        guard let header else { return true }
        let host = Self.hostPart(header)
        if host == "localhost" { return true }
        if let address = IPAddress(host) {
            return address.scope == .loopback || address == listen
        }
        return names.contains(host)
    }

    /// Whether a request with this `Sec-Fetch-Site` header may read `/stats.json`: not sent (not a browser, or an
    /// old one), the same origin, or typed by the user.
    static func allowsStats(fetchSite: String?) -> Bool {
        guard let fetchSite else { return true }
        let site = HostName.asciiLowercased(fetchSite)
        return site == "same-origin" || site == "none"
    }

    /// Whether a request that changes state (anything but GET and HEAD: the control calls) may run: not when a web
    /// page sent it. Browsers send `Origin` with every POST a page makes, same-origin ones included, and
    /// `Sec-Fetch-Site` with every request; `hostsctl control` and `curl` send neither, and a user typing an address
    /// cannot make a POST (`Sec-Fetch-Site: none`). So a page the operator opens (a cross-site form, or a
    /// rebound name whose `Host` the loopback check let through) cannot flush or reload.
    /// And it must carry ``controlHeader``: a page can send a header of its own only after a CORS preflight, which
    /// this listener never answers, so a browser that sends neither `Origin` nor `Sec-Fetch-Site` (an old one) still
    /// cannot make the call.
    static func allowsControl(method: String, origin: String?, fetchSite: String?, control: String?) -> Bool {
        guard method != "GET", method != "HEAD" else { return true }
        guard origin == nil, control == "1" else { return false }
        return fetchSite.map { HostName.asciiLowercased($0) == "none" } ?? true
    }

    /// The header a state-changing control call carries (`Hostsctl-Control: 1`); `hostsctl control` sends it.
    static let controlHeader = "hostsctl-control"

    /// The host of a `Host` header without its port or IPv6 brackets, lower case, without a trailing dot.
    static func hostPart(_ header: String) -> String {
        var text = HostName.asciiLowercased(header.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return text }
            return String(text[text.index(after: text.startIndex)..<close])
        }
        if let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon { text = String(text[..<colon]) }
        return text.trimmingTrailingDot
    }
}

extension String {
    fileprivate var trimmingTrailingDot: String { hasSuffix(".") ? String(dropLast()) : self }
}
