package import Crypto
import Foundation
import _CryptoExtras
package import HTTPDNSCore

/// The Tencent Cloud DNSPod-style HTTPDNS API.
///
/// - Request: `GET {endpoint}/d?dn=H&ttl=1`, with `&type=aaaa` for IPv6 and `&type=addrs` for both families.
/// - Answer (text): `ip1;ip2,ttl`; for both families `v4;v4,ttl-v6;v6,ttl`. A family without addresses is `0`,
///   and an optional `|clientIP` suffix is ignored. `0` alone or an empty body means no answer.
/// - Encrypted variant (`alg=aes`, with `id=ACCOUNT`): `dn` and the body are `hex(IV)` followed by
///   `hex(ciphertext)`, AES-CBC with PKCS#7 padding under the account's key. The legacy DES variant is not
///   supported.
package enum TencentHTTPDNS {
    /// The query for `host`, relative to the endpoint.
    static func suffix(host: HostName, family: AddressFamily, account: String?, key: SymmetricKey?)
        throws(HTTPDNSError)
        -> String
    {
        var dn = host.name
        var extra = ""
        if let key {
            dn = try encrypt(Array(host.name.utf8), key: key).hexString
            extra = "&id=\(account ?? "")&alg=aes"
        } else if let account {
            extra = "&id=\(account)"
        }
        switch family {
        case .ipv4: break
        case .ipv6: extra += "&type=aaaa"
        case .any: extra += "&type=addrs"
        }
        return "/d?dn=\(dn)\(extra)&ttl=1"
    }

    /// Interprets a response body (already decrypted for the AES variant).
    /// - Throws: `HTTPDNSError`: `httpStatus`, `badResponse`, `decryptionFailed` or `noData`.
    package static func addresses(
        status: Int,
        body: [UInt8],
        for host: HostName,
        family: AddressFamily,
        key: SymmetricKey?,
        source: ResolutionSource
    ) throws(HTTPDNSError) -> [ResolvedAddress] {
        func fail(_ code: HTTPDNSError.Code, _ message: String) -> HTTPDNSError {
            HTTPDNSError(code: code, message: message, host: host.name)
        }
        guard status == 200 else { throw fail(.httpStatus, "the HTTPDNS server answered HTTP \(status)") }
        var text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if let key, !text.isEmpty, text != "0" {
            guard let sealed = [UInt8](hex: text) else {
                throw fail(.decryptionFailed, "the encrypted HTTPDNS answer is not hexadecimal")
            }
            text = String(decoding: try decrypt(sealed, key: key), as: UTF8.self)
        }
        if let bar = text.lastIndex(of: "|") { text = String(text[..<bar]) }
        guard !text.isEmpty, text != "0" else { throw fail(.noData, "the HTTPDNS server has no answer") }
        let parts = family == .any ? text.split(separator: "-", omittingEmptySubsequences: false) : [Substring(text)]
        guard parts.count == 1 || (family == .any && parts.count == 2) else {
            throw fail(.badResponse, "the HTTPDNS answer \(HostName.printable(text)) is malformed")
        }
        let families: [AddressFamily] = family == .any ? [.ipv4, .ipv6] : [family]
        var addresses: [ResolvedAddress] = []
        for (part, partFamily) in zip(parts, families) {
            addresses += try parse(part, family: partFamily, host: host, source: source)
        }
        guard !addresses.isEmpty else { throw fail(.noData, "the HTTPDNS answer has no \(family) address") }
        return addresses
    }

    /// Parses `ip;ip,ttl` or `0`.
    private static func parse(
        _ part: Substring,
        family: AddressFamily,
        host: HostName,
        source: ResolutionSource
    ) throws(HTTPDNSError) -> [ResolvedAddress] {
        func malformed() -> HTTPDNSError {
            HTTPDNSError(
                code: .badResponse, message: "the HTTPDNS answer \(HostName.printable(String(part))) is malformed",
                host: host.name)
        }
        if part == "0" || part.isEmpty { return [] }
        guard let comma = part.lastIndex(of: ","), let rawTTL = UInt64(part[part.index(after: comma)...]) else {
            throw malformed()
        }
        let ttl = UInt32(min(rawTTL, UInt64(ResolvedAddress.maximumTTL)))
        var addresses: [ResolvedAddress] = []
        for text in part[..<comma].split(separator: ";").prefix(DNSWireMessage.maximumAddresses) {
            if text == "0" { continue }
            guard let ip = IPAddress(text), ip.family == family else { throw malformed() }
            addresses.append(ResolvedAddress(ip: ip, ttl: ttl, source: source))
        }
        return addresses
    }

    /// `IV || AES-CBC(plaintext)` with a random IV.
    static func encrypt(_ plaintext: [UInt8], key: SymmetricKey) throws(HTTPDNSError) -> [UInt8] {
        let iv = AES._CBC.IV()
        do {
            return Array(iv) + Array(try AES._CBC.encrypt(plaintext, using: key, iv: iv))
        } catch {
            throw HTTPDNSError(code: .internalError, message: "AES-CBC encryption failed: \(error)")
        }
    }

    /// Splits `IV || ciphertext` and decrypts.
    static func decrypt(_ sealed: [UInt8], key: SymmetricKey) throws(HTTPDNSError) -> [UInt8] {
        guard sealed.count >= 32, sealed.count % 16 == 0 else {
            throw HTTPDNSError(code: .decryptionFailed, message: "the encrypted HTTPDNS answer has a bad length")
        }
        do {
            let iv = try AES._CBC.IV(ivBytes: sealed.prefix(16))
            return Array(try AES._CBC.decrypt(sealed.dropFirst(16), using: key, iv: iv))
        } catch {
            throw HTTPDNSError(
                code: .decryptionFailed, message: "the encrypted HTTPDNS answer does not decrypt with the key")
        }
    }
}

extension Array where Element == UInt8 {
    /// Decodes hexadecimal text (either case); `nil` for odd lengths or other characters.
    init?(hex text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        self = out
    }
}
