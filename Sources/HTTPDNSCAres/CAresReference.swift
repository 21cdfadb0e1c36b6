import CAres
package import HTTPDNSCore

#if canImport(Glibc)
    import Glibc
#endif

/// c-ares's own builder and parsers of DNS messages: the reference that ``DNSWireMessage/query(for:type:)`` and
/// ``DNSAnswerWalk`` are held to, byte for byte, by the tests and the fuzz target `answer-walk`. Nothing else uses
/// them; every answer is read by the Swift walk.
package enum CAresReference {
    /// A c-ares status that is not `ARES_SUCCESS`.
    struct Status: Error, Equatable {
        /// The `ARES_E…` code.
        var code: Int32

        /// `ARES_ENODATA`: a well-formed answer without a record of the type asked for.
        var isNoData: Bool { code == ARES_ENODATA }
    }

    /// The query `ares_create_query` makes for `name` and `type`, with ID 0.
    /// - Throws: `HTTPDNSError.Code.badName` when c-ares cannot encode the name.
    static func query(for name: HostName, type: DNSRecordType) throws(HTTPDNSError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        var length: Int32 = 0
        let status = ares_create_query(name.name, DNSWireMessage.classIN, type.rawValue, 0, 1, &buffer, &length, 0)
        guard status == ARES_SUCCESS, let buffer else {
            throw HTTPDNSError(aresStatus: status, host: name.name, servers: [])
        }
        defer { ares_free_string(buffer) }
        return Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
    }

    /// The `A` or `AAAA` records of `message` as `ares_parse_a_reply` / `ares_parse_aaaa_reply` read them (at most
    /// ``DNSWireMessage/maximumAddresses``); `ARES_ENODATA` when there are none.
    static func addresses(
        in message: UnsafeBufferPointer<UInt8>,
        type: DNSRecordType,
        source: ResolutionSource
    ) -> Result<[ResolvedAddress], Status> {
        let maximumAddresses = DNSWireMessage.maximumAddresses
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

    /// ``addresses(in:type:source:)`` in ``DNSAnswerWalk``'s terms, for comparing the two: the addresses, empty
    /// for `ARES_ENODATA`, `nil` for every other refusal.
    package static func walkEquivalent(
        of message: UnsafeBufferPointer<UInt8>, type: DNSRecordType, source: ResolutionSource
    ) -> [ResolvedAddress]? {
        switch addresses(in: message, type: type, source: source) {
        case .success(let addresses): addresses
        case .failure(let status): status.isNoData ? [] : nil
        }
    }
}
