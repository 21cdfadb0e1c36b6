/// The EDNS Client Subnet option (RFC 7871 §6) and the OPT record that carries it, on the wire.
package enum EDNSClientSubnet {
    /// The option code of ECS.
    package static let optionCode: UInt16 = 8

    /// Why an ECS option cannot be used (RFC 7871 §7.1.1: the query is answered with FORMERR).
    package struct Malformed: Error, Hashable {
        /// What is wrong, for the logs.
        var reason: String
    }

    /// The option's data for `subnet` with `scope` (family, source and scope prefix lengths, then only the address
    /// bytes the source length covers), without the option code and length.
    package static func optionData(_ subnet: IPNetwork, scope: Int = 0) -> [UInt8] {
        let bytes = subnet.address.bytes
        var data: [UInt8] = [0, bytes.count == 4 ? 1 : 2, UInt8(subnet.prefixLength), UInt8(min(max(scope, 0), 128))]
        data += bytes.prefix((subnet.prefixLength + 7) / 8)
        return data
    }

    /// The whole option: code 8, the length, ``optionData(_:scope:)``.
    package static func option(_ subnet: IPNetwork, scope: Int = 0) -> [UInt8] {
        let data = optionData(subnet, scope: scope)
        return [0, UInt8(optionCode), UInt8(data.count >> 8), UInt8(data.count & 0xff)] + data
    }

    /// Reads an option's data: the network and the scope prefix length.
    /// - Throws: ``Malformed`` for an unknown family, a prefix longer than the family's addresses, an address
    ///   longer or shorter than its prefix needs, or bits set beyond the prefix (all FORMERR by RFC 7871).
    package static func read(_ data: ArraySlice<UInt8>) throws(Malformed) -> (subnet: IPNetwork, scope: Int) {
        guard data.count >= 4 else { throw Malformed(reason: "the client subnet option is \(data.count) bytes") }
        let start = data.startIndex
        let family = UInt16(data[start]) << 8 | UInt16(data[start + 1])
        let width: Int
        switch family {
        case 1: width = 4
        case 2: width = 16
        default: throw Malformed(reason: "the client subnet option has address family \(family)")
        }
        let source = Int(data[start + 2])
        let scope = Int(data[start + 3])
        guard source <= width * 8, scope <= width * 8 else {
            throw Malformed(reason: "the client subnet option's prefix is longer than its address")
        }
        let address = data.dropFirst(4)
        guard address.count == (source + 7) / 8 else {
            throw Malformed(reason: "the client subnet option carries \(address.count) address bytes for /\(source)")
        }
        var bytes = Array(address) + Array(repeating: 0, count: width - address.count)
        let network = IPNetwork(IPAddress(bytes: bytes)!, prefixLength: source)
        bytes = network.address.bytes
        guard bytes.prefix(address.count).elementsEqual(address) else {
            throw Malformed(reason: "the client subnet option has address bits set beyond /\(source)")
        }
        return (network, scope)
    }

    /// The UDP payload size every OPT record of the package announces, the server's answers and the clients' queries
    /// alike (the DNS Flag Day 2020 value, which fits every path without fragments).
    package static let payloadSize: UInt16 = 1_232

    /// `query` (a message without additional records, as c-ares builds them) with an OPT record carrying `subnet`.
    package static func addingOPT(to query: [UInt8], subnet: IPNetwork, scope: Int = 0) -> [UInt8] {
        DNSMessageWalk.appendingOPTRecord(carrying: option(subnet, scope: scope), to: query)
    }

    /// `message` with `subnet` (and `scope`) as an ECS option: added to its OPT record when that record ends the
    /// message, or in a new OPT record when it has none; `nil` when its OPT record is followed by others (the
    /// message is then left as it is). The message must carry no ECS option already.
    package static func settingOption(in message: [UInt8], _ subnet: IPNetwork, scope: Int = 0) -> [UInt8]? {
        guard message.count >= 12 else { return nil }
        guard DNSMessageWalk.optOptions(message) != nil else {
            return DNSMessageWalk.optRecord(message) == nil ? addingOPT(to: message, subnet: subnet, scope: scope) : nil
        }
        return DNSMessageWalk.appendingOption(option(subnet, scope: scope), to: message)
    }

    /// The scope of an answer to a query for `asked` (RFC 7871 §7.3): 0 without an option, at most the prefix
    /// sent.
    package static func scope(of answer: [UInt8], asked: IPNetwork, host: HostName) throws(HTTPDNSError) -> Int {
        let option: (subnet: IPNetwork, scope: Int)?
        do {
            option = try EDNSClientSubnet.find(in: answer)
        } catch {
            throw HTTPDNSError(code: .badResponse, message: error.reason, host: host.name)
        }
        guard let option else { return 0 }
        guard option.subnet == asked else {
            throw HTTPDNSError(
                code: .badResponse,
                message: "the answer's client subnet \(option.subnet) is not the \(asked) asked for", host: host.name)
        }
        return min(option.scope, asked.prefixLength)
    }

    /// The ECS option in `message`'s OPT record, or `nil` when it has none.
    /// - Throws: ``Malformed`` when the option is there but cannot be read.
    package static func find(in message: [UInt8]) throws(Malformed) -> (subnet: IPNetwork, scope: Int)? {
        guard let options = DNSMessageWalk.optOptions(message) else { return nil }
        var offset = options.lowerBound
        while offset + 4 <= options.upperBound {
            let code = UInt16(message[offset]) << 8 | UInt16(message[offset + 1])
            let length = Int(message[offset + 2]) << 8 | Int(message[offset + 3])
            guard offset + 4 + length <= options.upperBound else {
                throw Malformed(reason: "an EDNS option runs past its OPT record")
            }
            if code == optionCode { return try read(message[offset + 4..<offset + 4 + length]) }
            offset += 4 + length
        }
        return nil
    }
}
