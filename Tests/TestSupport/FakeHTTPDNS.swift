import Crypto
import Foundation
import _CryptoExtras

/// The names the fake HTTP DNS services know.
public struct FakeZone: Sendable {
    /// One name's data.
    public struct Entry: Sendable {
        /// IPv4 addresses.
        public var v4: [String]
        /// IPv6 addresses.
        public var v6: [String]
        /// The TTL of the records.
        public var ttl: Int
        /// A CNAME target (JSON API only); the addresses are then those of the target.
        public var alias: String?

        /// Creates an entry.
        public init(v4: [String] = [], v6: [String] = [], ttl: Int, alias: String? = nil) {
            self.v4 = v4
            self.v6 = v6
            self.ttl = ttl
            self.alias = alias
        }
    }

    /// Entries by lower-case name without a trailing dot.
    public var entries: [String: Entry]

    /// Creates a zone.
    public init(entries: [String: Entry]) { self.entries = entries }

    /// The same data as ``TestZone`` for the names the vendor tests use, plus a private-address name.
    public static let standard = FakeZone(entries: [
        "multi.test": Entry(v4: TestZone.multiV4, v6: TestZone.multiV6, ttl: 300),
        "v4only.test": Entry(v4: ["192.0.2.10"], ttl: 120),
        "v6only.test": Entry(v6: ["2001:db8::10"], ttl: 45),
        "alias.test": Entry(ttl: 60, alias: "multi.test"),
        "private.test": Entry(v4: ["10.0.0.7"], ttl: 30),
    ])
}

/// Request handlers for ``LocalHTTPServer`` that implement the documented HTTP DNS wire formats, including the
/// checks a real service makes (signatures, expiry, account IDs, encryption).
public enum FakeHTTPDNS {
    /// The Alibaba-style API: `/{account}/d?host=` and `/{account}/sign_d?host=&t=&s=` with
    /// `s = md5hex("host-secret-t")`, `query=4|6|4,6`, JSON answers and `{"code":…}` errors.
    /// - Parameter now: The server's clock in epoch seconds, for expiry checks.
    public static func alibaba(
        account: String,
        secret: String?,
        zone: FakeZone = .standard,
        now: (@Sendable () -> Int64)? = nil
    ) -> @Sendable (LocalHTTPServer.Request) -> LocalHTTPServer.Reply {
        let now = now ?? { Int64(Date().timeIntervalSince1970) }
        return { request in
            func error(_ status: Int, _ code: String) -> LocalHTTPServer.Reply {
                .text("{\"code\":\"\(code)\"}", status: status, contentType: "application/json")
            }
            guard request.method == "GET" else { return error(405, "MethodNotAllowed") }
            let parts = request.path.split(separator: "/")
            guard parts.count == 2, parts[0] == account else { return error(403, "InvalidAccount") }
            guard let host = request.query["host"], !host.isEmpty else { return error(400, "MissingArgument") }
            switch parts[1] {
            case "d":
                break
            case "sign_d":
                guard let secret, let tText = request.query["t"], let t = Int64(tText), let s = request.query["s"]
                else {
                    return error(400, "MissingArgument")
                }
                guard t >= now() else { return error(403, "SignatureExpired") }
                let expected = Insecure.MD5.hash(data: Array("\(host)-\(secret)-\(tText)".utf8))
                    .map { String(format: "%02x", $0) }.joined()
                guard s == expected else { return error(403, "InvalidSignature") }
            default:
                return error(404, "NotFound")
            }
            let query = request.query["query"] ?? "4"
            let entry = zone.entries[host.lowercased()]
            var body: [String: Any] = ["host": host, "ttl": entry?.ttl ?? 60, "origin_ttl": entry?.ttl ?? 60]
            body["ips"] = query.split(separator: ",").contains("4") ? (entry?.v4 ?? []) : []
            if query.split(separator: ",").contains("6") { body["ipsv6"] = entry?.v6 ?? [] }
            let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
            return .respond(status: 200, contentType: "application/json", body: Array(data))
        }
    }

    /// The Tencent DNSPod-style API: `/d?dn=H&ttl=1[&type=aaaa|addrs]`, text answers `ip;ip,ttl` (both families
    /// `v4…,ttl-v6…,ttl`, `0` for none); with `key`, `alg=aes` and `id=account` are required and `dn` and the
    /// answer are hex(IV) + hex(AES-CBC ciphertext).
    public static func tencent(
        zone: FakeZone = .standard,
        account: String? = nil,
        key: String? = nil
    ) -> @Sendable (LocalHTTPServer.Request) -> LocalHTTPServer.Reply {
        { request in
            guard request.method == "GET", request.path == "/d", var dn = request.query["dn"] else {
                return .text("", status: 404)
            }
            var symmetricKey: SymmetricKey?
            if let key {
                guard request.query["alg"] == "aes", request.query["id"] == account else {
                    return .text("", status: 403)
                }
                let sealedKey = SymmetricKey(data: Array(key.utf8))
                guard let sealed = [UInt8](hexText: dn), sealed.count >= 32,
                    let iv = try? AES._CBC.IV(ivBytes: sealed.prefix(16)),
                    let plain = try? AES._CBC.decrypt(sealed.dropFirst(16), using: sealedKey, iv: iv)
                else { return .text("", status: 400) }
                dn = String(decoding: plain, as: UTF8.self)
                symmetricKey = sealedKey
            }
            let withTTL = request.query["ttl"] == "1"
            let entry = zone.entries[dn.lowercased()]
            func list(_ ips: [String]) -> String {
                guard let entry, !ips.isEmpty else { return "0" }
                return ips.joined(separator: ";") + (withTTL ? ",\(entry.ttl)" : "")
            }
            let text: String
            switch request.query["type"] {
            case "aaaa": text = list(entry?.v6 ?? [])
            case "addrs": text = "\(list(entry?.v4 ?? []))-\(list(entry?.v6 ?? []))"
            default: text = list(entry?.v4 ?? [])
            }
            guard let symmetricKey else { return .text(text) }
            let iv = AES._CBC.IV()
            guard let sealed = try? AES._CBC.encrypt(Array(text.utf8), using: symmetricKey, iv: iv) else {
                return .text("", status: 500)
            }
            return .text((Array(iv) + Array(sealed)).map { String(format: "%02x", $0) }.joined())
        }
    }

    /// The JSON DNS API (`?name=&type=A|AAAA|1|28`), Google's schema: `Status`, `Question`, `Answer` with CNAMEs.
    public static func dnsJSON(zone: FakeZone = .standard)
        -> @Sendable (LocalHTTPServer.Request) -> LocalHTTPServer.Reply
    {
        { request in
            guard let name = request.query["name"], let typeText = request.query["type"] else {
                return .text("{\"error\":\"missing name or type\"}", status: 400, contentType: "application/json")
            }
            let type: Int
            switch typeText.uppercased() {
            case "A", "1": type = 1
            case "AAAA", "28": type = 28
            default: return .text("{\"error\":\"unsupported type\"}", status: 400, contentType: "application/json")
            }
            var key = name.lowercased()
            if key.hasSuffix(".") { key.removeLast() }
            var answers: [[String: Any]] = []
            var status = 3
            if var entry = zone.entries[key] {
                status = 0
                var owner = key
                if let alias = entry.alias, let target = zone.entries[alias] {
                    answers.append(["name": owner + ".", "type": 5, "TTL": entry.ttl, "data": alias + "."])
                    owner = alias
                    entry = target
                }
                for ip in type == 1 ? entry.v4 : entry.v6 {
                    answers.append(["name": owner + ".", "type": type, "TTL": entry.ttl, "data": ip])
                }
            }
            var body: [String: Any] = [
                "Status": status, "TC": false, "RD": true, "RA": true, "AD": false, "CD": false,
                "Question": [["name": key + ".", "type": type]],
            ]
            if !answers.isEmpty { body["Answer"] = answers }
            let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
            return .respond(status: 200, contentType: "application/dns-json", body: Array(data))
        }
    }
}

extension Array where Element == UInt8 {
    init?(hexText text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < utf8.count {
            guard let byte = UInt8(String(decoding: utf8[index...index + 1], as: UTF8.self), radix: 16) else {
                return nil
            }
            out.append(byte)
            index += 2
        }
        self = out
    }
}
