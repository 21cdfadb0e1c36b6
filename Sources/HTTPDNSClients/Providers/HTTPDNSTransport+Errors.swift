import NIOCore
import HTTPDNSCore
import HTTPDNSPinnedClients

extension HTTPDNSTransport {
    /// Maps an error from the HTTP stack to an `HTTPDNSError`.
    static func classify(_ error: any Error, endpoint: HTTPDNSEndpoint, host: HostName) -> HTTPDNSError {
        func make(_ code: HTTPDNSError.Code, _ message: String) -> HTTPDNSError {
            HTTPDNSError(code: code, message: "\(endpoint.url): \(message)", host: host.name, source: error)
        }
        switch error {
        case var error as HTTPDNSError:
            error.host = host.name
            if error.code == .timeout { error.message = "\(endpoint.url): \(error.message)" }
            return error
        case let error as HTTP2ConnectionLost:
            return make(.connectionLost, error.message)
        default:
            guard let failure = TransportFailure.classify(error) else {
                return make(.connectionFailed, "cannot reach the server: \(error)")
            }
            return make(failure.code, failure.message)
        }
    }
}
