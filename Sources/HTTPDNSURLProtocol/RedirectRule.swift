#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Foundation

/// How a 3xx answer turns into the next hop (RFC 9110 section 15.4, as browsers and curl apply it).
enum RedirectRule {
    /// The statuses that are followed when they carry a `Location`.
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The next hop after `status` with `location` for `request` (sent to `url`), or `nil` when the answer is not a
    /// redirect to follow. The next request has the handled tag cleared, so its host is resolved again.
    /// - 301 and 302 turn POST into GET; 303 turns anything but HEAD into GET; 307 and 308 keep method and body.
    /// - A hop to another origin (scheme, host or port) drops `Authorization`, `Proxy-Authorization` and `Cookie`.
    /// - Throws: ``InterceptionError/Code/unsupportedURL`` when the target is not http or https.
    static func next(
        after request: URLRequest,
        body: [UInt8]?,
        status: Int,
        location: String?,
        from url: URL
    ) throws(InterceptionError) -> (request: URLRequest, body: [UInt8]?)? {
        guard statuses.contains(status), let location, !location.isEmpty else { return nil }
        guard let target = URL(string: location, relativeTo: url)?.absoluteURL, RequestRewriting.host(of: target) != nil
        else {
            throw InterceptionError(code: .badServerResponse, message: "the redirect target '\(location)' is not a valid URL", url: url.absoluteString)
        }
        guard let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw InterceptionError(code: .unsupportedURL, message: "redirect to an unsupported scheme", url: target.absoluteString)
        }
        var next = request
        next.url = target
        RequestRewriting.clearHandled(&next)
        var nextBody = body
        let method = (request.httpMethod ?? "GET").uppercased()
        let becomesGET =
            switch status {
            case 301, 302: method == "POST"
            case 303: method != "HEAD" && method != "GET"
            default: false
            }
        if becomesGET {
            next.httpMethod = "GET"
            nextBody = nil
            for name in ["Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location"] {
                next.setValue(nil, forHTTPHeaderField: name)
            }
        }
        next.httpBody = nil
        next.httpBodyStream = nil
        if !sameOrigin(url, target) {
            for name in ["Authorization", "Proxy-Authorization", "Cookie"] { next.setValue(nil, forHTTPHeaderField: name) }
        }
        return (next, nextBody)
    }

    /// Whether two URLs share scheme, host and port (default ports filled in).
    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func origin(_ url: URL) -> (String, String, Int) {
            let scheme = url.scheme?.lowercased() ?? ""
            return (scheme, url.host?.lowercased() ?? "", url.port ?? (scheme == "https" ? 443 : 80))
        }
        return origin(a) == origin(b)
    }
}
