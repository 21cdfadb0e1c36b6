import HTTPDNSCore

/// Answers adapted to what this host's network can reach (``HostNetwork``): NAT64 synthesis and IPv6 first on a
/// host without an IPv4 route.
extension HostResolver {
    /// Whether `answer` may need adapting: this host has no IPv4 route. A host with one (nearly every host) pays an
    /// atomic load and a coarse clock read per answer, and the answer is not copied.
    @inline(__always)
    func needsAdapting(_ answer: borrowing RankedResolution) -> Bool {
        guard let network, answer.family == .any, answer.freshness != .local else { return false }
        return !network.hasIPv4Route
    }

    /// `answer` as this host can use it (call when ``needsAdapting(_:)``). Answers of the `.local` layer (IP
    /// literals, `localhost`) and answers with a non-public IPv4 address (a loopback or private service is reached
    /// directly, never through NAT64) are left as they are.
    /// - Throws: `HTTPDNSError.Code.noRoute` when nothing in the answer is reachable.
    func adaptedToNetwork(_ answer: RankedResolution) async throws(HTTPDNSError) -> RankedResolution {
        if let ready = try adaptedToNetworkIfReady(answer) { return ready }
        guard let network else { return answer }
        return try await network.adapted(answer)
    }

    /// ``adaptedToNetwork(_:)`` when it needs no waiting; `nil` when a NAT64 discovery must run first.
    func adaptedToNetworkIfReady(_ answer: RankedResolution) throws(HTTPDNSError) -> RankedResolution? {
        guard let network, needsAdapting(answer),
            !answer.addresses.contains(where: { $0.ip.family == .ipv4 && $0.ip.isNonPublic })
        else { return answer }
        return try network.adaptedIfReady(answer)
    }

    /// The address the cache keeps scores under for `ip` of `host`: for an address this resolver synthesized, the
    /// IPv4 address of the answer; an address the answer itself holds (a DNS64 one, say) keeps its own.
    func cacheAddress(for ip: IPAddress, of host: HostName) -> IPAddress {
        guard let network, ip.family == .ipv6 else { return ip }
        let embedded = network.cacheAddress(for: ip)
        guard embedded != ip, let cache, !cache.knows(ip, of: host) else { return ip }
        return embedded
    }
}
