/// The mark every query the server forwards carries, so that a forwarding loop is seen at its first turn: an EDNS
/// option of a local-use code (RFC 6891 §9) holding a token of this process and a hop count.
///
/// A query that arrives with this server's own token went round a loop (the documented CoreDNS `forward .` setup
/// with a pod on ClusterFirst DNS sends the server's forwarded queries back to it); one whose count reached
/// ``maximumHops`` went through too many servers that mark. Either is answered SERVFAIL instead of being forwarded
/// again. A query forwarded on keeps the count of the marker it came with, plus one, under this server's token.
package struct ForwardingMarker: Sendable {
    /// The option code (local use).
    package static let optionCode: UInt16 = 65_284
    /// The most marking forwarders a query may pass.
    package static let maximumHops = 8

    /// This process's token.
    package let token: [UInt8]

    /// A marker with a random token.
    package init() {
        var generator = SystemRandomNumberGenerator()
        token = (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// The token and hop count of `message`'s marker, or `nil` when it carries none that can be read.
    package static func read(_ message: [UInt8]) -> (token: ArraySlice<UInt8>, hops: Int)? {
        guard let options = DNSMessageWalk.optOptions(message) else { return nil }
        var offset = options.lowerBound
        while offset + 4 <= options.upperBound {
            let code = UInt16(message[offset]) << 8 | UInt16(message[offset + 1])
            let length = Int(message[offset + 2]) << 8 | Int(message[offset + 3])
            guard offset + 4 + length <= options.upperBound else { return nil }
            if code == optionCode, length == 9 {
                return (message[offset + 4..<offset + 12], Int(message[offset + 12]))
            }
            offset += 4 + length
        }
        return nil
    }

    /// Whether `message` came back round a loop, or passed too many marking forwarders.
    package func isLoop(_ message: [UInt8]) -> Bool {
        guard let (token, hops) = Self.read(message) else { return false }
        return token.elementsEqual(self.token) || hops >= Self.maximumHops
    }

    /// `message` to forward with this server's marker in place of any other (its hop count plus one): added to the
    /// OPT record when that ends the message, or in a new OPT record when there is none; `nil` when it cannot be
    /// marked (an OPT record followed by others, or records that cannot be walked).
    package func marking(_ message: [UInt8], questionEnd: Int) -> [UInt8]? {
        let hops = min((Self.read(message)?.hops ?? 0) + 1, 255)
        guard
            let stripped = try? ForwardedQuery.strippingOptions(
                message, questionEnd: questionEnd, removing: { $0 == Self.optionCode })
        else { return nil }
        let option = [UInt8(Self.optionCode >> 8), UInt8(Self.optionCode & 0xFF), 0, 9] + token + [UInt8(hops)]
        guard let options = DNSMessageWalk.optOptions(stripped) else {
            // A new OPT record goes right after the records the header counts: bytes trailing them are dropped
            // (a record appended after them would be read as those bytes).
            guard DNSMessageWalk.optRecord(stripped) == nil, let end = DNSMessageWalk.sectionsEnd(stripped) else {
                return nil
            }
            return DNSMessageWalk.appendingOPTRecord(carrying: option, to: Array(stripped[..<end]))
        }
        guard options.upperBound == stripped.count, DNSMessageWalk.sectionsEnd(stripped) == stripped.count else {
            return nil
        }
        return DNSMessageWalk.appendingOption(option, to: stripped)
    }
}
