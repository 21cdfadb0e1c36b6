import Foundation
import Glibc
import HTTPDNSCore

/// What identifies the network the host is on: its default routes (gateway and interface, per family) and the
/// prefixes of its addresses (loopback and link-local left out), and the addresses themselves.
struct NetworkSnapshot: Sendable, Hashable {
    /// `ipv4 via 192.0.2.1 dev eth0`, `ipv6 via fe80::1 dev eth0`, sorted.
    var defaultRoutes: [String]
    /// The networks of the host's addresses (`192.0.2.0/24`, `2001:db8:1::/64`), sorted.
    var prefixes: [String]
    /// The host's addresses.
    var addresses: Set<IPAddress>

    init(defaultRoutes: [String], prefixes: [String], addresses: Set<IPAddress>) {
        self.defaultRoutes = defaultRoutes
        self.prefixes = prefixes
        self.addresses = addresses
    }

    /// The network's identity: scores and answers learned on one network are kept under it.
    var key: String {
        (defaultRoutes.isEmpty ? ["no default route"] : defaultRoutes).joined(separator: "; ") + " | "
            + prefixes.joined(separator: ", ")
    }

    /// The network the calling thread sees now (its network namespace): `getifaddrs` and the kernel's route tables
    /// under `/proc/thread-self/net`.
    static func current() -> NetworkSnapshot {
        var addresses = Set<IPAddress>()
        var prefixes = Set<String>()
        var list: UnsafeMutablePointer<ifaddrs>?
        if getifaddrs(&list) == 0 {
            var cursor = list
            while let entry = cursor {
                defer { cursor = entry.pointee.ifa_next }
                guard let address = entry.pointee.ifa_addr, let ip = Self.ip(of: address),
                    ip.scope != .loopback, !Self.isLinkLocal(ip)
                else { continue }
                addresses.insert(ip)
                let length = entry.pointee.ifa_netmask.flatMap(Self.ip(of:)).map(Self.prefixLength) ?? 0
                let kept = ip.family == .ipv6 ? min(length == 0 ? 64 : length, 64) : length
                if let network = IPNetwork("\(ip)/\(kept)") { prefixes.insert(network.description) }
            }
            freeifaddrs(list)
        }
        return NetworkSnapshot(
            defaultRoutes: (Self.defaultIPv4Routes() + Self.defaultIPv6Routes()).sorted(), prefixes: prefixes.sorted(),
            addresses: addresses)
    }

    private static func ip(of address: UnsafeMutablePointer<sockaddr>) -> IPAddress? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                var raw = $0.pointee.sin_addr
                return withUnsafeBytes(of: &raw) { IPAddress(bytes: Array($0)) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                var raw = $0.pointee.sin6_addr
                return withUnsafeBytes(of: &raw) { IPAddress(bytes: Array($0)) }
            }
        default:
            return nil
        }
    }

    private static func isLinkLocal(_ ip: IPAddress) -> Bool {
        let bytes = ip.bytes
        return ip.family == .ipv6 ? bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 : bytes[0] == 169 && bytes[1] == 254
    }

    private static func prefixLength(_ mask: IPAddress) -> Int {
        mask.bytes.reduce(0) { $0 + $1.nonzeroBitCount }
    }

    /// Default routes of `/proc/thread-self/net/route`: destination and mask 0, up; the gateway is little-endian hex.
    private static func defaultIPv4Routes() -> [String] {
        lines("/proc/thread-self/net/route").dropFirst().compactMap { fields -> String? in
            guard fields.count >= 8, fields[1] == "00000000", fields[7] == "00000000",
                let flags = UInt32(fields[3], radix: 16), flags & 0x1 != 0,
                let gateway = UInt32(fields[2], radix: 16)
            else { return nil }
            let ip = IPAddress(bytes: withUnsafeBytes(of: gateway.littleEndian) { Array($0) })
            return "ipv4 via \(ip?.description ?? "?") dev \(fields[0])"
        }
    }

    /// Default routes of `/proc/thread-self/net/ipv6_route`: destination ::/0, up, not a reject route, not `lo`.
    private static func defaultIPv6Routes() -> [String] {
        lines("/proc/thread-self/net/ipv6_route").compactMap { fields -> String? in
            guard fields.count >= 10, fields[0] == String(repeating: "0", count: 32), fields[1] == "00",
                let flags = UInt32(fields[8], radix: 16), flags & 0x1 != 0, flags & 0x200 == 0, fields[9] != "lo"
            else { return nil }
            var bytes: [UInt8] = []
            var text = Substring(fields[4])
            while text.count >= 2, let byte = UInt8(text.prefix(2), radix: 16) {
                bytes.append(byte)
                text = text.dropFirst(2)
            }
            let gateway = IPAddress(bytes: bytes).map {
                $0 == IPAddress(bytes: [UInt8](repeating: 0, count: 16)) ? "" : " via \($0)"
            }
            return "ipv6\(gateway ?? "") dev \(fields[9])"
        }
    }

    private static func lines(_ path: String) -> [[String]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map {
            $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        }
    }
}
