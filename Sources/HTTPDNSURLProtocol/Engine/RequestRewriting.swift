#if canImport(FoundationNetworking)
    package import FoundationNetworking
#endif
import AsyncHTTPClient
import Foundation
import HTTPDNS
import NIOCore
import NIOHTTP1
import HTTPDNSCore

/// Rewriting a request to a chosen IP, and the "handled" tag that keeps a request from being rewritten twice.
///
/// On this platform `URLProtocol.setProperty(_:forKey:in:)` does not survive the bridge from `NSMutableURLRequest`
/// to `URLRequest`, so the tag is a reserved header, ``handledHeader``. The protocol's transport removes it before
/// anything goes on the wire. An application sets it with `HTTPDNSURLProtocol.markHandled(_:)` to keep one request
/// away from rewriting; such a request is loaded by URLSession's built-in HTTP support, which sends the header as it is.
package enum RequestRewriting {
    /// The reserved header that tags a request as handled.
    package static let handledHeader = "X-HTTPDNS-Handled"
    /// The URLProtocol property key also honoured as the tag where properties round-trip.
    static let handledPropertyKey = "HTTPDNSURLProtocolHandled"

    /// Whether `request` carries the handled tag (the header, or the URLProtocol property).
    static func isHandled(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: handledHeader) != nil
            || URLProtocol.property(forKey: handledPropertyKey, in: request) != nil
    }

    /// Tags `request` as handled.
    package static func markHandled(_ request: inout URLRequest) {
        request.setValue("1", forHTTPHeaderField: handledHeader)
    }

    /// Removes the handled tag, so the request is resolved and rewritten again (redirect hops do this).
    static func clearHandled(_ request: inout URLRequest) {
        // Looking is cheaper than writing: a write copies the whole request when it is shared, as most are.
        guard request.value(forHTTPHeaderField: handledHeader) != nil else { return }
        request.setValue(nil, forHTTPHeaderField: handledHeader)
    }

    /// The host of `url` as written, without IPv6 brackets.
    static func host(of url: URL) -> String? {
        guard let host = url.host, !host.isEmpty else { return nil }
        return host
    }

    /// `host[:port]` as the `Host` header names the origin of `url` (the port only when the URL has one).
    static func hostHeader(for url: URL) -> String? {
        guard let host = host(of: url) else { return nil }
        let literal = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        return url.port.map { "\(literal):\($0)" } ?? literal
    }

    /// Rewrites `request` to go to `address`: the URL's host becomes the IP (port kept, IPv6 in brackets), the
    /// `Host` header names the original `host[:port]`, and the request is tagged handled.
    /// - Throws: `HTTPDNSError.Code.badURL` when the URL has no host.
    static func rewrite(_ request: URLRequest, to address: IPAddress) throws(HTTPDNSError) -> URLRequest {
        guard let url = request.url, let hostHeader = hostHeader(for: url),
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else {
            throw HTTPDNSError(code: .badURL, message: "the URL has no host", url: request.url?.absoluteString)
        }
        components.percentEncodedHost = address.urlHost
        guard let rewritten = components.url else {
            throw HTTPDNSError(
                code: .badURL, message: "cannot rewrite the URL to \(address)", url: url.absoluteString)
        }
        var result = request
        result.url = rewritten
        result.setValue(hostHeader, forHTTPHeaderField: "Host")
        markHandled(&result)
        return result
    }

    /// Headers that describe one hop's connection or that the transport sets itself; they are never copied from
    /// the application's request to the wire.
    static let transportHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "proxy-connection", handledHeader.lowercased(), RequestTrace.tagHeader.lowercased(),
    ]
}

extension PinnedTransport.Exchange {
    /// The exchange for a request as the application wrote it (the caller pins it by setting ``address``), or for
    /// one rewritten by ``RequestRewriting/rewrite(_:to:)`` (an IP in the URL, the real host in `Host`; the client
    /// is pinned to the IP).
    /// The handled tag and hop-by-hop headers are dropped; `body` is the request's body, read already.
    init(_ request: URLRequest, body: ByteBuffer?) throws(HTTPDNSError) {
        guard let url = request.url, let urlHost = RequestRewriting.host(of: url),
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else {
            throw HTTPDNSError(code: .badURL, message: "the URL has no host", url: request.url?.absoluteString)
        }
        var host = urlHost.lowercased()
        var address: IPAddress?
        if let pinned = IPAddress(urlHost), let header = request.value(forHTTPHeaderField: "Host"),
            let realHost = Self.hostPart(ofHostHeader: header), IPAddress(realHost) == nil
        {
            // A rewritten request: connect to the IP, speak to the real host.
            address = pinned
            host = realHost.lowercased()
            components.percentEncodedHost = host
        } else if host != urlHost, IPAddress(urlHost) == nil {
            // The client is pinned by the lowercased name (`dnsOverride`), so the URL must carry that spelling.
            components.percentEncodedHost = host
        }
        components.fragment = nil
        guard let parsed = components.url else {
            throw HTTPDNSError(code: .badURL, message: "invalid URL", url: url.absoluteString)
        }
        var wire = HTTPClientRequest(url: parsed.absoluteString)
        wire.method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        let fields = request.allHTTPHeaderFields ?? [:]
        wire.headers.reserveCapacity(fields.count)
        for (name, value) in fields where !RequestRewriting.transportHeaders.contains(name.lowercased()) {
            // Checked here, by rule rather than by the client's error text, and reported without the value: it
            // may be a credential.
            guard Self.isToken(name), Self.isFieldValue(value) else {
                throw HTTPDNSError(
                    code: .invalidRequest,
                    message:
                        "the header field '\(Self.isToken(name) ? name : "(invalid name)")' has a name or value that is not valid HTTP",
                    url: url.absoluteString)
            }
            wire.headers.add(name: name, value: value)
        }
        if let body { wire.body = .bytes(body) }
        self.init(request: wire, body: body, parsedURL: parsed, host: host, address: address)
    }

    /// Whether `name` is an HTTP token (RFC 9110 section 5.6.2).
    static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
    }

    /// Whether `value` may be sent as a field value: no CR, LF, NUL or other control character but horizontal tab.
    static func isFieldValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }

    /// `api.test` from `api.test:8443`, `::1` from `[::1]:80`.
    static func hostPart(ofHostHeader header: String) -> String? {
        let header = header.trimmingCharacters(in: .whitespaces)
        if header.hasPrefix("[") {
            guard let close = header.firstIndex(of: "]") else { return nil }
            return String(header[header.index(after: header.startIndex)..<close])
        }
        let host = header.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)
        return host?.isEmpty == false ? host : nil
    }
}
