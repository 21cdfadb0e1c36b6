/// An address range in CIDR notation, `192.0.2.0/24` or `2001:db8::/32` (a bare address is its own /32 or /128).
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    /// The first address of the range.
    public let address: IPAddress
    /// How many leading bits every address of the range shares with ``address``.
    public let prefixLength: Int

    /// Parses `text`; `nil` when it is not an address with an optional `/LENGTH` that fits its family.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        let bits = address.bytes.count * 8
        let length: Int
        if parts.count == 2 {
            guard let parsed = Int(parts[1]), (0...bits).contains(parsed) else { return nil }
            length = parsed
        } else {
            length = bits
        }
        guard let first = IPAddress(bytes: Self.masked(address.bytes, length)) else { return nil }
        self.address = first
        self.prefixLength = length
    }

    /// A range whose `address` already has every bit beyond `prefixLength` clear.
    package init(masked address: IPAddress, prefixLength: Int) {
        self.address = address
        self.prefixLength = prefixLength
    }

    /// Whether `ip` is inside the range (an IPv4 range holds no IPv6 address, and the other way round).
    public func contains(_ ip: IPAddress) -> Bool {
        let bytes = ip.bytes
        guard bytes.count == address.bytes.count else { return false }
        return Self.masked(bytes, prefixLength) == address.bytes
    }

    /// `ADDRESS/LENGTH`.
    public var description: String { "\(address)/\(prefixLength)" }

    private static func masked(_ bytes: [UInt8], _ length: Int) -> [UInt8] {
        var result = bytes
        for index in result.indices {
            let keep = min(max(length - index * 8, 0), 8)
            result[index] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        return result
    }
}
