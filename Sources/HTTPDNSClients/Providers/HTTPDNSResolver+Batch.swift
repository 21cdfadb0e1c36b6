public import HTTPDNSCore

extension HTTPDNSResolver {
    /// Resolves many names at once, each as ``resolve(_:family:)`` would: for pre-resolution, warming a cache, or
    /// measuring a service.
    ///
    /// With the RFC 8484 wire format (``API/dnsMessage(method:)``) and an `https`
    /// endpoint that offers HTTP/2, the lookups go as one batch over the first endpoint's connection, as h2load
    /// sends: up to `maximumInFlight` streams open at once, each request made on the connection's event loop when a
    /// stream ends, and the calling task suspended once for the whole list instead of once per name. A lookup
    /// whose exchange does not give a definite answer there (the connection lost, a timeout, an HTTP error, an
    /// answer that cannot be used or that the private-address guard rejects) is asked again as
    /// ``resolve(_:family:)`` asks, with its failover to the next address and endpoint, so every result is one
    /// that call could have given. Other APIs resolve each name with ``resolve(_:family:)``, `maximumInFlight` at
    /// a time. The configuration's ``Configuration/budget`` bounds each lookup asked again; a batch exchange is
    /// bounded by the request timeout.
    /// - Parameters:
    ///   - hosts: The names, in any order; a name may appear more than once.
    ///   - family: Which address family to ask for; `AddressFamily.any` asks for `A` and `AAAA`.
    ///   - maximumInFlight: At most this many exchanges at once (at least 1).
    /// - Returns: One result per name, in the order of `hosts`.
    /// - Throws: `CancellationError` when the task is cancelled; every other failure is its name's result.
    public func resolveAll(_ hosts: [HostName], family: AddressFamily, maximumInFlight: Int = 100) async throws
        -> [Result<Resolution, HTTPDNSError>]
    {
        guard !hosts.isEmpty else { return [] }
        let window = max(1, maximumInFlight)
        var results = [Result<Resolution, HTTPDNSError>?](repeating: nil, count: hosts.count)
        if case .dnsMessage = configuration.api.kind, let endpoint = configuration.endpoints.first {
            try await resolveBatch(hosts, family: family, endpoint: endpoint, window: window, into: &results)
        }
        try await resolveEach(hosts, family: family, window: window, into: &results)
        return results.map { $0! }
    }

    /// The batch over the first endpoint's HTTP/2 connection: fills in the results it can decide.
    private func resolveBatch(
        _ hosts: [HostName], family: AddressFamily, endpoint: HTTPDNSEndpoint, window: Int,
        into results: inout [Result<Resolution, HTTPDNSError>?]
    ) async throws {
        let types: [DNSRecordType] = family == .any ? [.a, .aaaa] : family == .ipv4 ? [.a] : [.aaaa]
        let perHost = types.count
        guard
            let responses = try await transport.sendAll(
                count: hosts.count * perHost, window: window, to: endpoint,
                make: { index in self.dohRequest(hosts[index / perHost], types[index % perHost], nil).request })
        else { return }
        hosts: for (position, host) in hosts.enumerated() {
            var answers: [Result<[ResolvedAddress], HTTPDNSError>] = []
            for (offset, type) in types.enumerated() {
                // Not sent, or no answer from this address: left for resolve(_:family:).
                guard case .success(let response)? = responses[position * perHost + offset] else { continue hosts }
                do throws(HTTPDNSError) {
                    let answer = try dohAnswer(
                        response, endpoint: endpoint, host: host, type: type, subnet: nil, query: nil)
                    try guardAddresses(answer.addresses, host: host, endpoint: endpoint)
                    answers.append(.success(answer.addresses))
                } catch {
                    guard Self.isDefinite(error.code) else { continue hosts }
                    answers.append(.failure(error))
                }
            }
            results[position] = Result { () throws(HTTPDNSError) in
                let addresses: [ResolvedAddress]
                if answers.count == 1 {
                    addresses = try answers[0].get()
                } else {
                    do {
                        addresses = try DualStack.merge(
                            answers[0].mapError { $0 }, answers[1].mapError { $0 }, host: host, logger: logger)
                    } catch {
                        throw error as? HTTPDNSError
                            ?? HTTPDNSError(code: .internalError, message: "\(error)", host: host.name)
                    }
                }
                return Resolution(host: host.name, addresses: addresses)
            }
        }
    }

    /// ``resolve(_:family:)`` for each name without a result yet, `window` at a time.
    private func resolveEach(
        _ hosts: [HostName], family: AddressFamily, window: Int, into results: inout [Result<Resolution, HTTPDNSError>?]
    ) async throws {
        let pending = results.indices.filter { results[$0] == nil }
        guard !pending.isEmpty else { return }
        try await withThrowingTaskGroup(of: (Int, Result<Resolution, HTTPDNSError>).self) { group in
            var next = 0
            func add() {
                let position = pending[next]
                next += 1
                group.addTask {
                    do {
                        return (position, .success(try await self.resolve(hosts[position], family: family)))
                    } catch let error as HTTPDNSError {
                        return (position, .failure(error))
                    }
                }
            }
            while next < min(window, pending.count) { add() }
            while let (position, result) = try await group.next() {
                results[position] = result
                if next < pending.count { add() }
            }
        }
    }
}
