import CAres
package import HTTPDNSCore

#if canImport(Glibc)
    import Glibc
#endif

/// The DNS record types this package asks for.
package enum DNSRecordType: Int32, Sendable {
    case a = 1
    case aaaa = 28

    /// The family of the addresses this type carries.
    package var family: AddressFamily { self == .a ? .ipv4 : .ipv6 }
}

/// Extracts addresses and TTLs from a DNS answer message by c-ares's rules.
///
/// The c-ares parsers follow CNAME chains and give each address the smallest TTL along its chain.
package enum DNSAnswerParser {
    /// At most this many addresses are taken from one answer.
    package static let maximumAddresses = 256

    /// A c-ares status that is not `ARES_SUCCESS`.
    package struct Status: Error {
        package var code: Int32
    }

    /// Parses the `A` or `AAAA` records of `message`; `ARES_ENODATA` when there are none. Well-formed messages with
    /// plain names are read by ``DNSAnswerWalk`` without allocating; c-ares reads the rest.
    static func parse(
        _ message: UnsafeBufferPointer<UInt8>,
        type: DNSRecordType,
        source: ResolutionSource
    ) -> Result<[ResolvedAddress], Status> {
        if let addresses = DNSAnswerWalk.addresses(in: message, type: type, source: source, limit: maximumAddresses) {
            return addresses.isEmpty ? .failure(Status(code: ARES_ENODATA)) : .success(addresses)
        }
        return parseWithCAres(message, type: type, source: source)
    }

    /// ``parse(_:type:source:)`` by c-ares alone: the reference the Swift walk is tested against, and the reader of
    /// every message the walk leaves to it.
    package static func parseWithCAres(
        _ message: UnsafeBufferPointer<UInt8>,
        type: DNSRecordType,
        source: ResolutionSource
    ) -> Result<[ResolvedAddress], Status> {
        guard message.count <= Int(Int32.max) else { return .failure(Status(code: ARES_EBADRESP)) }
        var result: [ResolvedAddress] = []
        var status: Int32 = ARES_SUCCESS
        var count = Int32(maximumAddresses)
        switch type {
        case .a:
            withUnsafeTemporaryAllocation(of: ares_addrttl.self, capacity: maximumAddresses) { ttls in
                status = ares_parse_a_reply(message.baseAddress, Int32(message.count), nil, ttls.baseAddress, &count)
                guard status == ARES_SUCCESS else { return }
                result.reserveCapacity(Int(count))
                for entry in ttls.prefix(Int(count)) {
                    let ip = IPAddress(ipv4Network: entry.ipaddr.s_addr)
                    result.append(ResolvedAddress(ip: ip, ttl: UInt32(max(entry.ttl, 0)), source: source))
                }
            }
        case .aaaa:
            withUnsafeTemporaryAllocation(of: ares_addr6ttl.self, capacity: maximumAddresses) { ttls in
                status = ares_parse_aaaa_reply(message.baseAddress, Int32(message.count), nil, ttls.baseAddress, &count)
                guard status == ARES_SUCCESS else { return }
                result.reserveCapacity(Int(count))
                for var entry in ttls.prefix(Int(count)) {
                    guard let ip = withUnsafeBytes(of: &entry.ip6addr, { IPAddress(bytes: $0) }) else { continue }
                    result.append(ResolvedAddress(ip: ip, ttl: UInt32(max(entry.ttl, 0)), source: source))
                }
            }
        }
        guard status == ARES_SUCCESS else { return .failure(Status(code: status)) }
        return result.isEmpty ? .failure(Status(code: ARES_ENODATA)) : .success(result)
    }
}
