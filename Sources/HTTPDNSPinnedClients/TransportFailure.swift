import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
package import HTTPDNSCore

/// What went wrong in an HTTP exchange, told apart by the error's type, and whether the request may go to another
/// address. The one classification of AsyncHTTPClient, NIO and NIOSSL errors in the package, and its one mapping to
/// `HTTPDNSError` codes (``code``), which the DoH client and the fronts share.
package struct TransportFailure: Sendable, Equatable {
    /// The kind of failure.
    package enum Kind: Sendable, Equatable {
        case cancelled
        /// The response body is larger than the cap.
        case tooLarge
        /// The certificate does not verify or does not name the host.
        case certificateRejected
        /// The TLS handshake or record layer failed for another reason.
        case tlsFailure
        /// TCP connect or TLS handshake took too long: nothing was sent.
        case connectTimeout
        /// The exchange as a whole (or a read or write) took too long.
        case exchangeTimeout
        /// The server closed the connection before the answer was complete.
        case connectionClosed
        /// The client was shut down.
        case shutdown
        /// The URL cannot be sent.
        case badURL
        /// The request cannot be sent (a body that does not match its length, a TRACE with a body).
        case invalidRequest
        /// The answer is not valid HTTP, or the client rejected it.
        case badResponse
        /// No connection could be made (refused, unreachable, reset).
        case connectionFailed
    }

    /// Whether a failed attempt may go to another address.
    package enum Retry: Sendable, Equatable {
        /// Nothing was sent (connect, TLS handshake): any method may go to the next address.
        case beforeSending
        /// The connection broke after the request may have been sent: only idempotent methods move on.
        case afterSending
        /// Not on another address (a certificate rejection, a timeout of the whole exchange, a bad answer).
        case never
    }

    package var kind: Kind
    package var retry: Retry
    /// What happened, for an error message; never quotes a header value.
    package var message: String

    init(_ kind: Kind, _ message: String, _ retry: Retry) {
        self.kind = kind
        self.message = message
        self.retry = retry
    }

    /// The error code every client of the package reports this failure with (the DoH client, the URL protocol, the
    /// AsyncHTTPClient front): one mapping, so a rejected certificate is `certificateRejected` wherever it is met.
    package var code: HTTPDNSError.Code {
        switch kind {
        case .cancelled: .cancelled
        case .tooLarge: .responseTooLarge
        case .certificateRejected: .certificateRejected
        case .tlsFailure: .tlsFailure
        case .connectTimeout, .exchangeTimeout: .timeout
        case .connectionClosed: .connectionLost
        case .shutdown: .shutdown
        case .badURL: .badURL
        case .invalidRequest: .invalidRequest
        case .badResponse: .badResponse
        case .connectionFailed: .connectionFailed
        }
    }

    /// Classifies an error from AsyncHTTPClient, NIO or NIOSSL; `nil` for any other error, which its caller knows
    /// better (its own typed errors, `CancellationError`).
    package static func classify(_ error: any Error) -> TransportFailure? {
        switch error {
        case is NIOTooManyBytesError:
            return TransportFailure(.tooLarge, "the response body is larger than the cap", .never)
        case is ExchangeDeadline.Exceeded:
            return TransportFailure(.exchangeTimeout, "no complete answer in time", .never)
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return TransportFailure(.certificateRejected, "the certificate does not name the host: \(error)", .never)
        case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError:
            if isCertificateRejection(error) {
                return TransportFailure(.certificateRejected, "the server's certificate was rejected: \(error)", .never)
            }
            return TransportFailure(.tlsFailure, "TLS failed: \(error)", .beforeSending)
        case let error as HTTPClientError:
            return classify(error)
        case is HTTPParserError:
            return TransportFailure(.badResponse, "the answer is not valid HTTP: \(error)", .never)
        case ChannelError.connectTimeout:
            return TransportFailure(.connectTimeout, "connect timed out", .beforeSending)
        case is NIOConnectionError, is IOError, is ChannelError:
            return TransportFailure(.connectionFailed, "cannot connect: \(error)", .beforeSending)
        default:
            return nil
        }
    }

    private static func classify(_ error: HTTPClientError) -> TransportFailure {
        switch error {
        case .connectTimeout, .tlsHandshakeTimeout:
            return TransportFailure(.connectTimeout, "connect timed out (\(error))", .beforeSending)
        case .deadlineExceeded, .readTimeout, .writeTimeout, .getConnectionFromPoolTimeout:
            return TransportFailure(.exchangeTimeout, "no complete answer in time (\(error))", .never)
        case .remoteConnectionClosed:
            return TransportFailure(.connectionClosed, "the server closed the connection", .afterSending)
        case .cancelled:
            return TransportFailure(.cancelled, "the request was cancelled", .never)
        case .alreadyShutdown:
            return TransportFailure(.shutdown, "the client was shut down", .never)
        case .invalidURL, .emptyHost, .emptyScheme:
            return TransportFailure(.badURL, "invalid URL (\(error))", .never)
        default:
            if error == .bodyLengthMismatch || error == .traceRequestWithBody {
                return TransportFailure(.invalidRequest, "the request cannot be sent: \(error)", .never)
            }
            // Whatever else the client rejects is reported without its text, which may quote a header value.
            return TransportFailure(
                .badResponse, "HTTP exchange failed (AsyncHTTPClient rejected the request or the answer)", .never)
        }
    }

    /// Whether `error` comes from making the connection (TCP connect, TLS handshake): AsyncHTTPClient hands a request
    /// to a connection only once it is established, so nothing of the request was sent.
    package static func isConnectPhase(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError:
            return error == .connectTimeout || error == .tlsHandshakeTimeout
        case is NIOConnectionError:
            return true
        case ChannelError.connectTimeout:
            return true
        case let error as NIOSSLError:
            if case .handshakeFailed = error { return true }
            return false
        case is NIOSSLExtraError:
            return true
        case let error as IOError:
            return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL].contains(error.errnoCode)
        default:
            return false
        }
    }

    /// NIOSSL reports a failed verification as a BoringSSL error stack, whose reason is only exposed as text.
    private static func isCertificateRejection(_ error: any Error) -> Bool {
        let text = String(describing: error)
        return text.contains("CERTIFICATE_VERIFY_FAILED") || text.contains("certificate verify failed")
            || text.contains("failedToValidateHostname") || text.contains("unableToValidateCertificate")
    }
}
