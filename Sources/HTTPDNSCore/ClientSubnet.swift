/// An answer that holds for part of the clients only: what an upstream said for one client network (EDNS Client
/// Subnet, RFC 7871).
package struct ScopedResolution: Sendable {
    /// The answer.
    package var resolution: Resolution
    /// How many leading bits of a client's address decide the answer (RFC 7871 SCOPE PREFIX-LENGTH): the answer
    /// holds for every client in the asked network cut to this length; 0 means every client gets it.
    package var scopePrefixLength: Int

    /// Creates a scoped answer.
    package init(resolution: Resolution, scopePrefixLength: Int) {
        self.resolution = resolution
        self.scopePrefixLength = max(scopePrefixLength, 0)
    }
}

/// A negative answer (no such name, or no address of the family) to a query for a client network, with the part of
/// the network it holds for: an authoritative server that tailors answers may have none for one network and some for
/// another, so a negative answer is every network's only when its scope is 0.
package struct ScopedNegativeAnswer: Error, Sendable {
    /// The negative answer.
    package var error: HTTPDNSError
    /// The RFC 7871 scope of the answer (the network asked, when the answer said nothing that can be read).
    package var scopePrefixLength: Int

    /// A negative answer holding for `scopePrefixLength` bits of the network asked.
    package init(error: HTTPDNSError, scopePrefixLength: Int) {
        self.error = error
        self.scopePrefixLength = max(scopePrefixLength, 0)
    }
}

/// A resolver that can ask on behalf of a client network, so that an authoritative server tailoring answers by
/// network (a CDN) answers for that network rather than for the resolver's own address.
package protocol ClientSubnetResolver: HostNameResolver {
    /// Resolves `host` for clients in `clientSubnet` (an address with its prefix length, already cut to what may be
    /// disclosed) and says for which part of that network the answer holds. A negative answer may come as a
    /// ``ScopedNegativeAnswer`` (or as a plain `HTTPDNSError`, whose scope is then not known).
    func resolve(_ host: HostName, family: AddressFamily, clientSubnet: IPNetwork) async throws -> ScopedResolution
}

extension IPNetwork {
    /// The network of `address` cut to `prefixLength` bits (at most the address's own length); an IPv4-mapped IPv6
    /// address (`::ffff:a.b.c.d`, an IPv4 client of a dual-stack socket) is taken as its IPv4 address and the
    /// length as an IPv4 one.
    package init(_ address: IPAddress, prefixLength: Int) {
        var bytes = address.bytes
        if bytes.count == 16, bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            bytes = Array(bytes.suffix(4))
        }
        let length = min(max(prefixLength, 0), bytes.count * 8)
        for index in bytes.indices {
            let keep = min(max(length - index * 8, 0), 8)
            bytes[index] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        // Four or sixteen bytes always make an address.
        self.init(masked: IPAddress(bytes: bytes)!, prefixLength: length)
    }

    /// Whether every address of `other` is inside this network (same family, at least as long a prefix).
    package func contains(_ other: IPNetwork) -> Bool {
        other.prefixLength >= prefixLength && contains(other.address)
    }

    /// The same network cut to at most `length` bits.
    package func truncated(to length: Int) -> IPNetwork {
        length >= prefixLength ? self : IPNetwork(address, prefixLength: length)
    }
}
