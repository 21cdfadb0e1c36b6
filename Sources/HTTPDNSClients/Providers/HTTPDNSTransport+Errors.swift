import NIOCore
import HTTPDNSCore
import HTTPDNSPinnedClients

extension HTTPDNSTransport {
    /// Maps an error from the HTTP stack to a ``DNSError``.
    static func classify(_ error: any Error, endpoint: HTTPDNSEndpoint, host: HostName) -> DNSError {
        func make(_ code: DNSError.Code, _ message: String) -> DNSError {
            DNSError(code: code, message: "\(endpoint.url): \(message)", host: host.name, source: error)
        }
        switch error {
        case var error as DNSError:
            error.host = host.name
            if error.code == .timeout { error.message = "\(endpoint.url): \(error.message)" }
            return error
        case let error as HTTP2ConnectionLost:
            return make(.transportFailure, error.message)
        default:
            guard let failure = TransportFailure.classify(error) else {
                return make(.transportFailure, "cannot reach the server: \(error)")
            }
            switch failure.kind {
            case .tooLarge: return make(.responseTooLarge, failure.message)
            case .certificateRejected, .tlsFailure: return make(.tlsFailure, failure.message)
            case .connectTimeout, .exchangeTimeout: return make(.timeout, failure.message)
            case .shutdown: return make(.shutdown, failure.message)
            case .cancelled, .connectionClosed, .badURL, .invalidRequest, .badResponse, .connectionFailed:
                return make(.transportFailure, failure.message)
            }
        }
    }
}
