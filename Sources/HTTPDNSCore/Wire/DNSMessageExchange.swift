package import Logging

/// Something that sends a whole DNS query message to its servers and returns the answer matched to it: c-ares
/// (`CAresResolver`) and the server's own sockets (`PlainDNSClient`). Address lookups over it, with or without a
/// client network, are written once here, so both paths build, check and read messages the same way.
package protocol DNSMessageExchange: Sendable {
    /// Sends `message` (one question) and returns the answer, with `message`'s ID and question bytes.
    func send(message: [UInt8]) async throws -> [UInt8]
}

extension DNSMessageExchange {
    /// The addresses of `host` of `type` (A or AAAA) from one query.
    /// - Throws: `HTTPDNSError` from the exchange or the answer (`notFound`, `noData`, `badResponse`, ...).
    package func addresses(of host: HostName, type: DNSRecordType, source: ResolutionSource) async throws
        -> [ResolvedAddress]
    {
        let query = DNSWireMessage.query(for: host, type: type)
        return try DNSLookupMessages.addresses(
            in: try await send(message: query), query: query, host: host, type: type, source: source)
    }

    /// The addresses of `host` of `type` for clients in `subnet` (an EDNS Client Subnet option, RFC 7871), and the
    /// scope the answer holds for: 0 without the option in the answer, never longer than the subnet sent.
    /// - Throws: `ScopedNegativeAnswer` for NXDOMAIN and no-data (with the scope the upstream gave), else
    ///   `HTTPDNSError`.
    package func scopedAddresses(
        of host: HostName, type: DNSRecordType, subnet: IPNetwork, source: ResolutionSource
    ) async throws -> (addresses: [ResolvedAddress], scope: Int) {
        let query = DNSLookupMessages.query(for: host, type: type, subnet: subnet)
        return try DNSLookupMessages.scopedAddresses(
            in: try await send(message: query), query: query, host: host, type: type, subnet: subnet, source: source)
    }

    /// `host` resolved for `clientSubnet` with one query a family (both in parallel for ``AddressFamily/any``,
    /// the longer scope of the two taken).
    package func scopedResolution(
        _ host: HostName, family: AddressFamily, clientSubnet: IPNetwork, source: ResolutionSource, logger: Logger
    ) async throws -> ScopedResolution {
        switch family {
        case .ipv4, .ipv6:
            let (addresses, scope) = try await scopedAddresses(
                of: host, type: family == .ipv4 ? .a : .aaaa, subnet: clientSubnet, source: source)
            return ScopedResolution(
                resolution: Resolution(host: host.name, addresses: addresses), scopePrefixLength: scope)
        case .any:
            async let v4 = Result(catching: {
                try await self.scopedAddresses(of: host, type: .a, subnet: clientSubnet, source: source)
            })
            let v6 = await Result(catching: {
                try await self.scopedAddresses(of: host, type: .aaaa, subnet: clientSubnet, source: source)
            })
            // Both families together: the merge weighs plain errors, and the longer scope is taken anyway.
            let plain = { (error: any Error) -> any Error in (error as? ScopedNegativeAnswer)?.error ?? error }
            let (four, six) = await (v4.mapError(plain), v6.mapError(plain))
            let scope = max((try? four.get())?.scope ?? 0, (try? six.get())?.scope ?? 0)
            let addresses = try DualStack.merge(
                four.map(\.addresses), six.map(\.addresses), host: host, logger: logger)
            return ScopedResolution(
                resolution: Resolution(host: host.name, addresses: addresses), scopePrefixLength: scope)
        }
    }
}

/// An address lookup's messages, for every way of sending them: the query, and what its answer says. Written once
/// for the tasks' path (``DNSMessageExchange``) and for a server's event loop sending its own misses.
package enum DNSLookupMessages {
    /// The query for `host`'s records of `type` (A or AAAA), with an ECS option for `subnet` when given.
    package static func query(for host: HostName, type: DNSRecordType, subnet: IPNetwork? = nil) -> [UInt8] {
        let query = DNSWireMessage.query(for: host, type: type)
        return subnet.map { EDNSClientSubnet.addingOPT(to: query, subnet: $0) } ?? query
    }

    /// The addresses `answer` gives for `query` (asked for `host`, of the query's type).
    /// - Throws: `HTTPDNSError` (`notFound`, `noData`, `badResponse`, ...).
    package static func addresses(
        in answer: [UInt8], query: [UInt8], host: HostName, type: DNSRecordType, source: ResolutionSource
    ) throws(HTTPDNSError) -> [ResolvedAddress] {
        var answer = answer
        // The checks expect the ID asked (0); c-ares hands the answer back under its own.
        if answer.count >= 2 { (answer[0], answer[1]) = (0, 0) }
        return try DNSWireMessage.addresses(in: answer, for: host, type: type, source: source, query: query)
    }

    /// The addresses `answer` gives for `query` (asked for `host` on behalf of `subnet`), and the scope they hold
    /// for: 0 without the option in the answer, never longer than the subnet sent.
    /// - Throws: `ScopedNegativeAnswer` for NXDOMAIN and no-data (with the scope the upstream gave), else
    ///   `HTTPDNSError`.
    package static func scopedAddresses(
        in answer: [UInt8], query: [UInt8], host: HostName, type: DNSRecordType, subnet: IPNetwork,
        source: ResolutionSource
    ) throws -> (addresses: [ResolvedAddress], scope: Int) {
        var answer = answer
        if answer.count >= 2 { (answer[0], answer[1]) = (0, 0) }
        let parsed = Result { () throws(HTTPDNSError) in
            try DNSWireMessage.addresses(in: answer, for: host, type: type, source: source, query: query)
        }
        if case .failure(let error) = parsed, error.code.isNegativeAnswer {
            // Kept by the scope the upstream gave, like an answer with addresses (the network asked when the
            // option cannot be read: never wider than what is known).
            let scope = (try? EDNSClientSubnet.scope(of: answer, asked: subnet, host: host)) ?? subnet.prefixLength
            throw ScopedNegativeAnswer(error: error, scopePrefixLength: scope)
        }
        return (try parsed.get(), try EDNSClientSubnet.scope(of: answer, asked: subnet, host: host))
    }
}
