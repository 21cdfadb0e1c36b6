package import HTTPDNSCore
package import Logging

/// Where a request goes on within an endpoint's addresses, and a first exchange sent with no task on a ready HTTP/2
/// connection.
extension HTTPDNSTransport {
    /// Where ``send(_:to:host:logger:from:)`` begins within an endpoint's addresses.
    package struct AddressPoint: Sendable {
        /// The index of the first address to try.
        var address = 0
        /// The failure of the address before it, thrown if no later address answers.
        var lastError: HTTPDNSError?
        /// HTTP/2 retries already spent on the first address tried (a stream the server refused before).
        var retries = 0
    }

    /// What an exchange sent with no task (``ReadyExchange``) came to: the response to interpret, where
    /// ``send(_:to:host:logger:from:)`` goes on (the same address again after a stream the server refused, the next
    /// one after a failure or a 5xx answer), or its cancellation.
    package enum ReadyOutcome {
        case response(Response)
        indirect case goOn(AddressPoint)
        case cancelled
    }

    /// A request for a ready HTTP/2 connection, made by ``readyExchange(_:to:)``: ``send(completion:)`` sends it with
    /// no task, ``cancel()`` stops it.
    package struct ReadyExchange: Sendable {
        let connection: HTTP2DNSConnection
        let exchange: HTTP2DNSExchange

        /// Sends the request. `completion` runs once, on the connection's event loop, with the whole answer or why there is none
        /// (``HTTPDNSTransport/outcome(of:to:host:request:logger:)`` says what it comes to).
        package func send(completion: @escaping (Result<Response, any Error>) -> Void) {
            connection.send(exchange, completion: completion)
        }

        /// Ends the exchange with `CancellationError` unless it has ended (before ``send(completion:)`` too); from
        /// any thread.
        package func cancel() { connection.cancel(exchange) }
    }

    /// What ``send(_:to:host:logger:from:)`` would have done with `result`, the first exchange of `request` to
    /// `endpoint`'s first address sent with no task.
    package static func outcome(
        of result: Result<Response, any Error>, to endpoint: HTTPDNSEndpoint, host: HostName, request: String,
        logger: Logger
    ) -> ReadyOutcome {
        switch result {
        case .success(let response):
            guard let error = serverError(response, endpoint: endpoint, host: host) else { return .response(response) }
            logger.debug("HTTP DNS server error, trying the next address", metadata: ["server": "\(response.server)"])
            return .goOn(AddressPoint(address: 1, lastError: error))
        case .failure(is CancellationError):
            return .cancelled
        case .failure(let error as HTTP2ConnectionLost) where error.retryable:
            logger.debug(
                "HTTP/2 connection lost, retrying on a new one",
                metadata: ["server": "\(endpoint.servers.first ?? endpoint.url)", "error": "\(error)"])
            return .goOn(AddressPoint(address: 0, retries: 1))
        case .failure(let error):
            let failure = classify(error, endpoint: endpoint, host: host)
            logFailure(failure, request: request, server: endpoint.servers.first ?? endpoint.url, logger: logger)
            return .goOn(AddressPoint(address: 1, lastError: failure))
        }
    }

    /// `request` for `endpoint`'s first address, to be sent with no task, when an HTTP/2 connection to it is up and
    /// takes new streams; `nil` otherwise (``send(_:to:host:logger:from:)`` connects).
    package func readyExchange(_ request: Request, to endpoint: HTTPDNSEndpoint) -> ReadyExchange? {
        guard endpoint.scheme == .https, !endpoint.hostIsIPAddress, let address = endpoint.targets.first,
            let server = endpoint.servers.first
        else { return nil }
        let key = PinKey(endpoint, address: address)
        let connection: HTTP2DNSConnection? = state.withLock { state in
            guard !state.isShutdown, case .ready(_, let connection)? = state.http2[key] else { return nil }
            return connection
        }
        guard let connection, connection.isUsable else { return nil }
        let exchange = connection.prepare(
            request, timeout: configuration.requestTimeout, limit: configuration.maximumResponseBytes, server: server)
        return ReadyExchange(connection: connection, exchange: exchange)
    }
}
