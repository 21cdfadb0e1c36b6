import Crypto
import Foundation
package import HTTPDNSCore

/// The Alibaba Cloud-style HTTPDNS API, version 1.
///
/// - Unsigned: `GET {endpoint}/{account}/d?host=H[&query=4,6]`.
/// - Signed: `GET {endpoint}/{account}/sign_d?host=H&t=T&s=S[&query=…]`, where `T` is the expiry time in epoch
///   seconds and `S = md5hex("H-secret-T")`.
/// - Success: HTTP 200 with `{"host":"H","ips":["192.0.2.1"],"ipsv6":["2001:db8::1"],"ttl":60,"origin_ttl":600}`;
///   an empty `ips` means the name has no address of that family.
/// - Failure: an HTTP 4xx with `{"code":"SignatureExpired"}`, `{"code":"InvalidSignature"}`, …
package enum AlibabaHTTPDNS {
    /// The request path and query for `host`, relative to the endpoint.
    static func suffix(
        account: String,
        host: HostName,
        family: AddressFamily,
        signing: (secret: HTTPDNSSecret, expiry: Int64)?
    ) -> String {
        var query = "host=\(host.name)"
        let path: String
        if let signing {
            path = "sign_d"
            query +=
                "&t=\(signing.expiry)&s=\(signature(host: host.name, secret: signing.secret.value, expiry: signing.expiry))"
        } else {
            path = "d"
        }
        switch family {
        case .ipv4: break
        case .ipv6: query += "&query=6"
        case .any: query += "&query=4,6"
        }
        return "/\(account)/\(path)?\(query)"
    }

    /// `md5hex("host-secret-expiry")`, lower-case hex.
    package static func signature(host: String, secret: String, expiry: Int64) -> String {
        Insecure.MD5.hash(data: Array("\(host)-\(secret)-\(expiry)".utf8)).hexString
    }

    private struct Answer: Decodable {
        var host: String?
        var ips: [String]?
        var ipsv6: [String]?
        var ttl: Int64?
    }

    private struct Failure: Decodable {
        var code: String
    }

    /// Interprets a response.
    /// - Throws: `HTTPDNSError`: `signatureExpired`, `invalidSignature`, `httpStatus`, `badResponse`,
    ///   `questionMismatch` or `noData`.
    package static func addresses(
        status: Int,
        body: [UInt8],
        for host: HostName,
        family: AddressFamily,
        source: ResolutionSource
    ) throws(HTTPDNSError) -> [ResolvedAddress] {
        func fail(_ code: HTTPDNSError.Code, _ message: String) -> HTTPDNSError {
            HTTPDNSError(code: code, message: message, host: host.name)
        }
        guard status == 200 else {
            let code = try? JSONDecoder().decode(Failure.self, from: Data(body)).code
            switch code {
            case "SignatureExpired":
                throw fail(.signatureExpired, "the HTTPDNS server says the request signature has expired")
            case "InvalidSignature":
                throw fail(.invalidSignature, "the HTTPDNS server rejected the request signature")
            case "InvalidHost":
                throw fail(.badName, "the HTTPDNS server rejected the host name")
            default:
                let detail = code.map { " (\(HostName.printable($0)))" } ?? ""
                throw fail(.httpStatus, "the HTTPDNS server answered HTTP \(status)\(detail)")
            }
        }
        let answer: Answer
        do {
            answer = try JSONDecoder().decode(Answer.self, from: Data(body))
        } catch {
            throw fail(.badResponse, "the HTTPDNS answer is malformed: \(DoHJSONAnswer.describe(error))")
        }
        if let answered = answer.host, DoHJSONAnswer.normalise(answered) != host.name {
            throw fail(.questionMismatch, "the HTTPDNS answer is for \(HostName.printable(answered))")
        }
        guard let rawTTL = answer.ttl, rawTTL >= 0 else {
            throw fail(.badResponse, "the HTTPDNS answer has no valid ttl")
        }
        let ttl = UInt32(min(rawTTL, Int64(ResolvedAddress.maximumTTL)))
        var addresses: [ResolvedAddress] = []
        let lists: [(AddressFamily, [String])] = [(.ipv4, answer.ips ?? []), (.ipv6, answer.ipsv6 ?? [])]
        for (listFamily, list) in lists where family == .any || family == listFamily {
            for text in list.prefix(DNSWireMessage.maximumAddresses) {
                guard let ip = IPAddress(text), ip.family == listFamily else {
                    throw fail(.badResponse, "the HTTPDNS answer lists \(HostName.printable(text)) as \(listFamily)")
                }
                addresses.append(ResolvedAddress(ip: ip, ttl: ttl, source: source))
            }
        }
        guard !addresses.isEmpty else { throw fail(.noData, "the HTTPDNS answer has no \(family) address") }
        return addresses
    }
}

extension Sequence where Element == UInt8 {
    /// Lower-case hexadecimal.
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
