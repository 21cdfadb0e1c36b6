public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
/// What an override lookup found: the addresses and the pattern that matched.
@_spi(Benchmarks) public struct OverrideMatch: Hashable, Sendable {
    /// The addresses, in the order they were configured.
    @_spi(Benchmarks) public var addresses: [IPAddress]
    /// The pattern that matched: the exact name, or the most specific wildcard.
    @_spi(Benchmarks) public var pattern: HostPattern
}

/// An immutable set of host overrides: exact names and wildcards, each with its addresses.
///
/// Precedence: an exact name beats any wildcard; among wildcards the longest suffix wins. A value type with no I/O,
/// so it is cheap to build, swap and test.
@_spi(Benchmarks) public struct OverrideTable: Sendable {
    private var exact = NameIndex<OverrideMatch>()
    private var wildcards = NameIndex<OverrideMatch>()

    /// An empty table.
    init() {}

    /// A table from `(pattern, addresses)` pairs; addresses of repeated patterns are merged in order, without
    /// duplicates.
    init(_ entries: some Sequence<(HostPattern, [IPAddress])>) {
        for (pattern, addresses) in entries {
            add(addresses, for: pattern)
        }
    }

    /// The number of patterns.
    @_spi(Benchmarks) public var count: Int { exact.count + wildcards.count }

    /// Whether the table has no pattern.
    var isEmpty: Bool { exact.count == 0 && wildcards.count == 0 }

    /// Every pattern with its addresses: exact names first, then wildcards, each group sorted by name.
    var entries: [OverrideMatch] {
        exact.all.map(\.value).sorted { $0.pattern.description < $1.pattern.description }
            + wildcards.all.map(\.value).sorted { $0.pattern.description < $1.pattern.description }
    }

    /// Adds `addresses` to `pattern`, after any it already has.
    mutating func add(_ addresses: [IPAddress], for pattern: HostPattern) {
        let key = Self.key(pattern)
        if case .exact = pattern {
            let merged = exact[key].map { Self.unique($0.addresses + addresses) } ?? Self.unique(addresses)
            exact[key] = OverrideMatch(addresses: merged, pattern: pattern)
        } else {
            let merged = wildcards[key].map { Self.unique($0.addresses + addresses) } ?? Self.unique(addresses)
            wildcards[key] = OverrideMatch(addresses: merged, pattern: pattern)
        }
    }

    /// Replaces the addresses of `pattern`; an empty list removes it.
    mutating func set(_ addresses: [IPAddress], for pattern: HostPattern) {
        let value = addresses.isEmpty ? nil : OverrideMatch(addresses: Self.unique(addresses), pattern: pattern)
        if case .exact = pattern {
            exact[Self.key(pattern)] = value
        } else {
            wildcards[Self.key(pattern)] = value
        }
    }

    /// The addresses for `name`: its exact entry, else the wildcard with the longest matching suffix.
    @_spi(Benchmarks) public func lookup(_ name: HostName) -> OverrideMatch? {
        if isEmpty { return nil }
        var text = name.name
        return text.withUTF8 { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            if let match = exact.lookup(raw) {
                return match
            }
            guard wildcards.count > 0 else { return nil }
            // Suffixes after each dot, longest first: a.b.example.com -> b.example.com, example.com, com.
            for index in raw.indices where raw[index] == UInt8(ascii: ".") {
                let suffix = UnsafeRawBufferPointer(rebasing: raw[(index + 1)...])
                if let match = wildcards.lookup(suffix) {
                    return match
                }
            }
            return nil
        }
    }

    private static func key(_ pattern: HostPattern) -> String {
        switch pattern {
        case .exact(let name): name.name
        case .wildcard(let suffix): suffix.name
        }
    }

    private static func unique(_ addresses: [IPAddress]) -> [IPAddress] {
        if addresses.count < 2 { return addresses }
        if addresses.count <= 16 {
            var result: [IPAddress] = []
            result.reserveCapacity(addresses.count)
            for address in addresses where !result.contains(address) { result.append(address) }
            return result
        }
        var seen = Set<IPAddress>()
        return addresses.filter { seen.insert($0).inserted }
    }
}
