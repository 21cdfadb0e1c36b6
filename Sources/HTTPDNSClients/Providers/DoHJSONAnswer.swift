import Foundation
package import HTTPDNSCore

/// The JSON DNS API (`application/dns-json`) as Google and Cloudflare serve it.
///
/// `GET {endpoint}?name=NAME&type=A` answers `{"Status":0,"Question":[{"name":"n.","type":1}],
/// "Answer":[{"name":"n.","type":5,"TTL":60,"data":"c."},{"name":"c.","type":1,"TTL":60,"data":"192.0.2.1"}]}`.
/// `Status` is the DNS RCODE; `Answer` holds the CNAME chain too, so the records are followed from the name
/// asked, and each address gets the smallest TTL along its chain, as c-ares does for wire answers.
package enum DoHJSONAnswer {
    private struct Message: Decodable {
        var Status: Int
        var TC: Bool?
        var Question: [Record]?
        var Answer: [Record]?
    }

    private struct Record: Decodable {
        var name: String
        var type: Int
        var TTL: Int64?
        var data: String?
    }

    private struct SubnetField: Decodable {
        var edns_client_subnet: String?
    }

    /// The scope an answer to a query with `edns_client_subnet=` gives in its own `edns_client_subnet`
    /// (`ADDRESS/SCOPE`, as Google's API answers), cut to the prefix asked; `nil` when it gives none or names
    /// another network.
    static func scope(in body: [UInt8], asked: IPNetwork) -> Int? {
        guard let field = try? JSONDecoder().decode(SubnetField.self, from: Data(body)).edns_client_subnet,
            let slash = field.lastIndex(of: "/"), let scope = Int(field[field.index(after: slash)...]),
            let address = IPAddress(field[..<slash]), asked.contains(address) || asked.address == address
        else { return nil }
        return min(max(scope, 0), asked.prefixLength)
    }

    /// The most CNAME links followed before an answer is called malformed.
    static let maximumChain = 16

    /// Extracts the addresses of `type` for `name`.
    /// - Throws: `HTTPDNSError`: `badResponse` for malformed JSON or records, `questionMismatch`, an RCODE code,
    ///   or `noData`.
    package static func addresses(
        in body: [UInt8],
        for name: HostName,
        type: DNSRecordType,
        source: ResolutionSource
    ) throws(HTTPDNSError) -> [ResolvedAddress] {
        func fail(_ code: HTTPDNSError.Code, _ message: String) -> HTTPDNSError {
            HTTPDNSError(code: code, message: message, host: name.name)
        }
        let message: Message
        do {
            message = try JSONDecoder().decode(Message.self, from: Data(body))
        } catch {
            throw fail(.badResponse, "the JSON DNS answer is malformed: \(Self.describe(error))")
        }
        if let question = message.Question?.first {
            guard Self.normalise(question.name) == name.name, question.type == Int(type.rawValue) else {
                throw fail(
                    .questionMismatch,
                    "the JSON DNS answer is for \(HostName.printable(question.name)) type \(question.type)"
                )
            }
        }
        switch message.Status {
        case 0: break
        case 1: throw fail(.formatError, "the server could not parse the query (FORMERR)")
        case 2: throw fail(.serverFailure, "the server failed to answer (SERVFAIL)")
        case 3: throw fail(.notFound, "the name does not exist (NXDOMAIN)")
        case 4: throw fail(.notImplemented, "the server does not implement the query (NOTIMP)")
        case 5: throw fail(.refused, "the server refused the query (REFUSED)")
        default: throw fail(.badResponse, "the JSON DNS answer has Status \(message.Status)")
        }
        if message.TC == true { throw fail(.badResponse, "the JSON DNS answer is truncated (TC)") }
        let records = message.Answer ?? []
        // Follow the CNAME chain from the name asked.
        var current = name.name
        var ttlCap = UInt32.max
        for _ in 0...maximumChain {
            guard let alias = records.first(where: { $0.type == 5 && normalise($0.name) == current }) else { break }
            guard let target = alias.data, let ttl = Self.ttl(alias.TTL) else {
                throw fail(.badResponse, "a CNAME record of the JSON DNS answer lacks data or TTL")
            }
            ttlCap = min(ttlCap, ttl)
            current = normalise(target)
        }
        var addresses: [ResolvedAddress] = []
        for record in records where record.type == Int(type.rawValue) && normalise(record.name) == current {
            guard let data = record.data, let ip = IPAddress(data), ip.family == type.family,
                let ttl = Self.ttl(record.TTL)
            else {
                throw fail(.badResponse, "an address record of the JSON DNS answer is malformed")
            }
            addresses.append(ResolvedAddress(ip: ip, ttl: min(ttl, ttlCap), source: source))
            if addresses.count == DNSWireMessage.maximumAddresses { break }
        }
        guard !addresses.isEmpty else {
            throw fail(.noData, "the JSON DNS answer has no \(type == .a ? "A" : "AAAA") record for the name")
        }
        return addresses
    }

    /// A JSON TTL as seconds, or `nil` when missing or out of range.
    private static func ttl(_ value: Int64?) -> UInt32? {
        guard let value, value >= 0 else { return nil }
        return UInt32(min(value, Int64(ResolvedAddress.maximumTTL)))
    }

    /// Lowercased and without the trailing dot.
    static func normalise(_ name: String) -> String {
        var text = name.lowercased()
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// A short description of a decoding error, without echoing the whole body.
    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? "not valid JSON of the expected shape" : "bad or missing value at \(path)"
        default:
            return "not valid JSON"
        }
    }
}
