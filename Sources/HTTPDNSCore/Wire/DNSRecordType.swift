/// The DNS record types this package asks for.
package enum DNSRecordType: Int32, Sendable {
    case a = 1
    case aaaa = 28

    /// The family of the addresses this type carries.
    package var family: AddressFamily { self == .a ? .ipv4 : .ipv6 }
}
