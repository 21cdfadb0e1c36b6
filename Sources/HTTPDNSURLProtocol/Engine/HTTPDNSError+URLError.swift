import Foundation
public import HTTPDNSCore

extension HTTPDNSError {
    /// The `URLError` code URLSession callers see for this error.
    var urlErrorCode: URLError.Code {
        switch code.value {
        case .badURL, .invalidRequest: .badURL
        case .unsupportedURL: .unsupportedURL
        case .connectionFailed: .cannotConnectToHost
        case .connectionLost: .networkConnectionLost
        case .timeout: .timedOut
        case .certificateRejected: .serverCertificateUntrusted
        case .tlsFailure: .secureConnectionFailed
        case .tooManyRedirects: .httpTooManyRedirects
        case .requestBodyTooLarge, .responseTooLarge: .dataLengthExceedsMaximum
        case .badResponse: .badServerResponse
        case .insecureRedirect: .appTransportSecurityRequiresSecureConnection
        case .cancelled: .cancelled
        case .shutdown, .invalidConfiguration, .fileError: .cannotLoadFromNetwork
        default: .cannotFindHost
        }
    }

    /// This error as the `URLError` URLSession callers receive: the matching code, the failing URL, and this error as
    /// the underlying error (`NSUnderlyingErrorKey`), so that code checking `URLError.Code` keeps working.
    var urlError: URLError {
        var info: [String: Any] = [NSUnderlyingErrorKey: self, NSLocalizedDescriptionKey: description]
        if let url, let parsed = URL(string: url) {
            info[NSURLErrorFailingURLErrorKey] = parsed
        }
        return URLError(urlErrorCode, userInfo: info)
    }

    /// The library's error in `error`: the error itself, or the underlying error of a `URLError` that a URLSession
    /// call threw or passed to its completion handler.
    public init?(_ error: any Error) {
        if let error = error as? HTTPDNSError {
            self = error
        } else if let error = error as? URLError,
            let underlying = error.userInfo[NSUnderlyingErrorKey] as? HTTPDNSError
        {
            self = underlying
        } else {
            return nil
        }
    }
}
