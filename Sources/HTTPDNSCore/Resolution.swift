/// Where an address came from: `cares`, `literal`, `localhost`, and later `cache`, `override`, a provider name.
public struct ResolutionSource: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The source's stable name, as printed in JSON.
    package let name: String

    /// Creates a source with a stable name.
    public init(_ name: String) { self.name = name }

    /// Creates a source from a string literal.
    public init(stringLiteral value: String) { self.name = value }

    /// A DNS answer obtained through c-ares.
    public static let cares: ResolutionSource = "cares"
    /// The host was already an IP address; nothing was queried.
    public static let literal: ResolutionSource = "literal"
    /// `localhost` or a name under `.localhost`, answered locally as RFC 6761 asks.
    public static let localhost: ResolutionSource = "localhost"

    /// The source's name.
    public var description: String { name }
}

/// One address of a resolved host with the time it may be cached for.
public struct ResolvedAddress: Hashable, Sendable, CustomStringConvertible {
    /// The largest TTL the DNS allows (RFC 2181, 2^31 - 1 seconds); used for IP literals.
    package static let maximumTTL: UInt32 = 2_147_483_647

    /// The address.
    public var ip: IPAddress
    /// The time to live in seconds, as the source gave it.
    public var ttl: UInt32
    /// Where the address came from.
    public var source: ResolutionSource

    /// Creates a resolved address.
    public init(ip: IPAddress, ttl: UInt32, source: ResolutionSource) {
        self.ip = ip
        self.ttl = ttl
        self.source = source
    }

    /// `IP (ttl Ns, source)`.
    public var description: String { "\(ip) (ttl \(ttl)s, \(source))" }
}

/// The answer for one host: its addresses, IPv4 first in the order the source gave them.
public struct Resolution: Hashable, Sendable {
    /// The host that was resolved, as it was asked for (normalised).
    public var host: String
    /// The addresses; never empty for a successful resolution.
    public var addresses: [ResolvedAddress]

    /// Creates a resolution.
    public init(host: String, addresses: [ResolvedAddress]) {
        self.host = host
        self.addresses = addresses
    }
}

/// Something that resolves host names to IP addresses.
///
/// Implementations throw ``HTTPDNSError`` for resolution failures and `CancellationError` when the calling task
/// is cancelled. They must be safe to call from many tasks at once.
public protocol HostNameResolver: Sendable {
    /// Resolves `host` to addresses of `family`.
    /// - Parameters:
    ///   - host: A validated host name.
    ///   - family: Which address family to ask for; ``AddressFamily/any`` asks for both.
    /// - Returns: The addresses with their TTLs; never empty.
    /// - Throws: ``HTTPDNSError`` when resolution fails, `CancellationError` when the task is cancelled.
    func resolve(_ host: HostName, family: AddressFamily) async throws -> Resolution
}

extension HostNameResolver {
    /// Resolves a host given as text, which may also be an IP literal or `localhost`.
    ///
    /// - IP literals (`192.0.2.1`, `2001:db8::1`, `[2001:db8::1]`) are returned as they are with source
    ///   ``ResolutionSource/literal`` and no query; a literal of the other family gives ``HTTPDNSError/Code/noData``.
    /// - `localhost` and names under `.localhost` answer `127.0.0.1` and `::1` without a query (RFC 6761).
    /// - Anything else must be a valid ``HostName``.
    /// - Throws: ``HTTPDNSError`` (``HTTPDNSError/Code/badName`` for malformed names), `CancellationError`.
    public func resolve(_ text: String, family: AddressFamily = .any) async throws -> Resolution {
        if let literal = try LocalAnswers.answer(for: text, family: family) { return literal }
        return try await resolve(try HostName(text), family: family)
    }
}

/// A resolver whose queries keep going out for a while after the task that asked is cancelled: c-ares 1.18 cannot
/// take back one query of a channel, so its remaining tries are still sent. A server facing clients counts a lookup
/// abandoned by its client as upstream work until then, so opening and dropping requests cannot turn into upstream
/// queries faster than its bounds allow.
package protocol UncancellableQueries: Sendable {
    /// How long one query can keep going when no answer comes: until its last try has timed out.
    var longestQuery: Duration { get }
}

/// Answers that need no query: IP literals and `localhost`.
package enum LocalAnswers {
    package static func answer(for text: String, family: AddressFamily) throws(HTTPDNSError) -> Resolution? {
        try answer(for: text, name: { try? HostName(text) }, family: family)
    }

    /// As ``answer(for:family:)``, with the name parsed by the caller (`name` is asked only for a non-literal).
    package static func answer(for text: String, name parse: () -> HostName?, family: AddressFamily)
        throws(HTTPDNSError)
        -> Resolution?
    {
        if let ip = IPAddress(text) {
            guard family == .any || family == ip.family else {
                throw HTTPDNSError(
                    code: .noData,
                    message: "\(ip.family) literal cannot answer a \(family) query",
                    host: text
                )
            }
            let address = ResolvedAddress(ip: ip, ttl: ResolvedAddress.maximumTTL, source: .literal)
            return Resolution(host: ip.description, addresses: [address])
        }
        guard let name = parse(), name.isLocalhost else { return nil }
        var addresses: [ResolvedAddress] = []
        if family != .ipv6 {
            addresses.append(
                .init(ip: IPAddress(ipv4: 127, 0, 0, 1), ttl: ResolvedAddress.maximumTTL, source: .localhost))
        }
        if family != .ipv4 {
            addresses.append(.init(ip: IPAddress("::1")!, ttl: ResolvedAddress.maximumTTL, source: .localhost))
        }
        return Resolution(host: name.name, addresses: addresses)
    }
}
