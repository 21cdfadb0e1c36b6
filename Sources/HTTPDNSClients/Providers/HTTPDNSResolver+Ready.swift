package import HTTPDNSCore
import Logging

/// A DoH lookup's first exchange sent with no task, on a ready HTTP/2 connection: what the library's one-name lookups
/// and the server's event loops share (docs/architecture.md, "Where c-ares stays").
extension HTTPDNSResolver {
    /// What a DoH exchange sent with no task decided (``decide(_:_:)``): the answer, a definite failure, where the
    /// lookup goes on (``failover(_:from:_:)``), or that it was cancelled.
    package enum DoHStep {
        case answered(Answer)
        indirect case failed(HTTPDNSError)
        indirect case goOn(FailoverPoint)
        case cancelled
    }

    /// The first exchange of a wire-format DoH lookup, ready to go out with no task (``prepareDoH(_:type:subnet:)``).
    package final class DoHLookup: Sendable {
        fileprivate let exchange: HTTPDNSTransport.ReadyExchange
        fileprivate let host: HostName
        fileprivate let type: DNSRecordType
        fileprivate let subnet: IPNetwork?
        fileprivate let query: [UInt8]
        /// The request as the logs may show it.
        fileprivate let request: String

        fileprivate init(
            exchange: HTTPDNSTransport.ReadyExchange, host: HostName, type: DNSRecordType, subnet: IPNetwork?,
            query: [UInt8], request: String
        ) {
            (self.exchange, self.host, self.type, self.subnet, self.query, self.request) = (
                exchange, host, type, subnet, query, request
            )
        }

        /// Sends the query; `completion` runs once, on the connection's event loop, with the response or why there is none, for
        /// ``HTTPDNSResolver/decide(_:_:)``.
        package func send(_ completion: @escaping (Result<HTTPDNSTransport.Response, any Error>) -> Void) {
            exchange.send(completion: completion)
        }

        /// Stops the exchange (its completion then has `CancellationError`), from any thread.
        package func cancel() { exchange.cancel() }
    }

    /// The first exchange of a wire-format DoH lookup of `type` for `host`, on the first endpoint's ready HTTP/2
    /// connection: `nil` for the other APIs, or when no such connection is up (the tasks' path connects).
    package func prepareDoH(_ host: HostName, type: DNSRecordType, subnet: IPNetwork?) -> DoHLookup? {
        guard case .dnsMessage = configuration.api.kind, !configuration.endpoints.isEmpty else { return nil }
        let (request, query) = dohRequest(host, type, subnet)
        guard let exchange = transport.readyExchange(request, to: configuration.endpoints[0]) else { return nil }
        return DoHLookup(
            exchange: exchange, host: host, type: type, subnet: subnet, query: query ?? [],
            request: request.loggableSuffix ?? request.suffix)
    }

    /// What `result`, the outcome of `lookup`'s exchange, comes to, decided by the functions the tasks' path calls:
    /// the transport's rules for its first address, ``dohAnswer(_:endpoint:host:type:subnet:query:)``, the guard
    /// and the failover's rule. Synchronous: the server's event loops call it where the answer arrives.
    package func decide(_ lookup: DoHLookup, _ result: Result<HTTPDNSTransport.Response, any Error>) -> DoHStep {
        let endpoint = configuration.endpoints[0]
        var point = FailoverPoint()
        switch HTTPDNSTransport.outcome(
            of: result, to: endpoint, host: lookup.host, request: lookup.request, logger: logger)
        {
        case .cancelled:
            return .cancelled
        case .goOn(let address):
            point.address = address
            return .goOn(point)
        case .response(let response):
            do throws(HTTPDNSError) {
                let answer = try dohAnswer(
                    response, endpoint: endpoint, host: lookup.host, type: lookup.type, subnet: lookup.subnet,
                    query: lookup.query)
                try guardAddresses(answer.addresses, host: lookup.host, endpoint: endpoint)
                return .answered(answer)
            } catch {
                if let definite = failed(error, at: &point) { return .failed(definite) }
                return .goOn(point)
            }
        }
    }

    /// Goes on with a DoH lookup from `point`, where an exchange sent with no task left it (``DoHStep/goOn(_:)``),
    /// as ``resolve(_:family:clientSubnet:)`` would have gone on: for `clientSubnet` when given.
    /// - Throws: As ``resolve(_:family:)``.
    package func resume(
        _ host: HostName, type: DNSRecordType, clientSubnet: IPNetwork?, from point: FailoverPoint
    ) async throws -> ScopedResolution {
        let answer = try await doh(host, type, clientSubnet, from: point)
        return ScopedResolution(
            resolution: Resolution(host: host.name, addresses: answer.addresses), scopePrefixLength: answer.scope)
    }

    /// Whether an event loop may ask this resolver with no task (``prepareDoH(_:type:subnet:)``): the RFC 8484 API.
    package var asksWithoutTask: Bool {
        if case .dnsMessage = configuration.api.kind { true } else { false }
    }

    /// The error of a lookup that outlasted ``Configuration/budget``, as the tasks' path throws it.
    package func budgetExceeded(_ host: HostName, budget: Duration) -> HTTPDNSError {
        HTTPDNSError(
            code: .timeout, message: "\(source) gave no answer within its \(budget) budget", host: host.name,
            servers: configuration.endpoints.map(\.url))
    }

    /// Where a lookup goes on through the endpoints: the endpoint, the place within its addresses, and what the ones
    /// before it gave.
    package struct FailoverPoint: Sendable {
        /// The index of the endpoint to ask.
        var endpoint = 0
        /// Where within that endpoint's addresses.
        var address = HTTPDNSTransport.AddressPoint()
        /// The servers tried before, named in the error if no later one answers.
        var servers: [String] = []
        /// The last failure before, thrown if no later endpoint answers.
        var lastError: HTTPDNSError?

        /// The start: the first address of the first endpoint.
        package init() {}
    }

    /// What ``failover(_:from:_:)`` does with `error` from the endpoint at `point`: the error to throw at once when it
    /// is definite, else `nil` with `point` moved to the next endpoint and the error remembered.
    func failed(_ error: HTTPDNSError, at point: inout FailoverPoint) -> HTTPDNSError? {
        var error = error
        let endpoint = configuration.endpoints[point.endpoint]
        point.servers += error.servers.isEmpty ? [endpoint.url] : error.servers
        error.servers = point.servers
        if Self.isDefinite(error.code) { return error }
        logger.debug(
            "HTTP DNS endpoint failed",
            metadata: ["provider": "\(source)", "endpoint": "\(endpoint.url)", "error": "\(error.code)"]
        )
        point.lastError = error
        point.endpoint += 1
        point.address = HTTPDNSTransport.AddressPoint()
        return nil
    }
}
