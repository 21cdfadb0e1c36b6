#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import NIOCore
import HTTPDNSCore

/// How a 3xx answer turns into the next hop (RFC 9110 section 15.4, as browsers and curl apply it).
enum RedirectRule {
    /// The statuses that are followed when they carry a `Location`.
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    /// Where a redirect goes and what becomes of the request, in terms both fronts apply to their own types.
    struct Step: Sendable {
        /// The absolute target URL (http or https).
        var target: URL
        /// The method of the next hop (upper case).
        var method: String
        /// Whether the next hop is a GET without the body and its content headers (``bodyHeaders``).
        var becomesGET: Bool
        /// Whether the target is another origin: the next hop drops ``credentialHeaders``.
        var crossOrigin: Bool
    }

    /// Headers that describe a body, dropped when a redirect turns the request into a GET.
    static let bodyHeaders = [
        "Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location",
    ]
    /// Headers that carry credentials or the origin, dropped on a redirect to another origin.
    static let credentialHeaders = ["Authorization", "Proxy-Authorization", "Cookie", "Origin"]

    /// Refuses a hop from `https` at `url` to `http` at `target` unless `allowed`, so nothing the TLS connection
    /// protected goes out in clear.
    /// - Throws: `HTTPDNSError.Code.insecureRedirect`.
    static func checkDowngrade(from url: URL, to target: URL?, allowed: Bool) throws(HTTPDNSError) {
        guard !allowed, url.scheme?.lowercased() == "https", target?.scheme?.lowercased() == "http" else { return }
        throw HTTPDNSError(
            code: .insecureRedirect, message: "refused a redirect from https to \(target?.absoluteString ?? "http")",
            url: url.absoluteString)
    }

    /// The redirect after `status` with `location` for a `method` request sent to `url`, or `nil` when the answer is
    /// not a redirect to follow.
    /// - 301 and 302 turn POST into GET; 303 turns anything but HEAD into GET; 307 and 308 keep method and body.
    /// - Throws: `HTTPDNSError.Code.unsupportedURL` when the target is not http or https,
    ///   `HTTPDNSError.Code.badResponse` when `location` is not a URL.
    static func step(status: Int, location: String?, method: String, from url: URL) throws(HTTPDNSError) -> Step? {
        guard statuses.contains(status), let location, !location.isEmpty else { return nil }
        guard let target = URL(string: location, relativeTo: url)?.absoluteURL, RequestRewriting.host(of: target) != nil
        else {
            throw HTTPDNSError(
                code: .badResponse, message: "the redirect target '\(location)' is not a valid URL",
                url: url.absoluteString)
        }
        guard let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPDNSError(
                code: .unsupportedURL, message: "redirect to an unsupported scheme", url: target.absoluteString)
        }
        let method = method.uppercased()
        let becomesGET =
            switch status {
            case 301, 302: method == "POST"
            case 303: method != "HEAD" && method != "GET"
            default: false
            }
        return Step(
            target: target, method: becomesGET ? "GET" : method, becomesGET: becomesGET,
            crossOrigin: !sameOrigin(url, target))
    }

    /// The next hop after `status` with `location` for `request` (sent to `url`), or `nil` when the answer is not a
    /// redirect to follow (``step(status:location:method:from:)``). The next request has the handled tag cleared,
    /// so its host is resolved again.
    static func next(
        after request: URLRequest,
        body: ByteBuffer?,
        status: Int,
        location: String?,
        from url: URL
    ) throws(HTTPDNSError) -> (request: URLRequest, body: ByteBuffer?)? {
        guard let step = try step(status: status, location: location, method: request.httpMethod ?? "GET", from: url)
        else { return nil }
        var next = request
        next.url = step.target
        RequestRewriting.clearHandled(&next)
        var nextBody = body
        if step.becomesGET {
            next.httpMethod = "GET"
            nextBody = nil
            for name in bodyHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        next.httpBody = nil
        next.httpBodyStream = nil
        if step.crossOrigin {
            for name in credentialHeaders { next.setValue(nil, forHTTPHeaderField: name) }
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
