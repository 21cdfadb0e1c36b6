public import Foundation

/// An error from a request the URL protocol handled, with a stable ``code`` and the context it happened in.
///
/// URLSession callers receive it wrapped in a `URLError` with the matching code (see ``urlError``), so code that
/// checks `URLError.Code` keeps working; the `InterceptionError` is the error's `NSUnderlyingErrorKey`.
public struct InterceptionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Value: String, Hashable, Sendable, CaseIterable {
            case badURL, unsupportedURL, resolutionFailed, connectionFailed, connectionLost, timedOut
            case certificateRejected, tlsFailure, tooManyRedirects, requestBodyTooLarge, responseTooLarge
            case badServerResponse, cancelled, shutdown, invalidConfiguration, invalidRequest, insecureRedirect
        }

        let value: Value

        init(_ value: Value) { self.value = value }

        /// The URL is malformed or has no host.
        public static let badURL = Code(.badURL)
        /// The scheme is not `http` or `https`.
        public static let unsupportedURL = Code(.unsupportedURL)
        /// The host could not be resolved; the ``InterceptionError/source`` is the `DNSError`.
        public static let resolutionFailed = Code(.resolutionFailed)
        /// No connection could be made to any address tried (refused, unreachable).
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection closed before the whole response arrived.
        public static let connectionLost = Code(.connectionLost)
        /// The connect or the exchange took longer than allowed.
        public static let timedOut = Code(.timedOut)
        /// The server's certificate was rejected for the real host name; never retried on another address.
        public static let certificateRejected = Code(.certificateRejected)
        /// The TLS handshake failed for another reason.
        public static let tlsFailure = Code(.tlsFailure)
        /// The redirect limit was reached.
        public static let tooManyRedirects = Code(.tooManyRedirects)
        /// The request body (a stream) is larger than the cap.
        public static let requestBodyTooLarge = Code(.requestBodyTooLarge)
        /// The response body is larger than the cap.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// The server's answer is not valid HTTP.
        public static let badServerResponse = Code(.badServerResponse)
        /// The request was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The interceptor was shut down.
        public static let shutdown = Code(.shutdown)
        /// The request cannot be sent as it is (an invalid header name or value, a body stream that fails).
        public static let invalidRequest = Code(.invalidRequest)
        /// The interceptor's configuration is invalid (a trust-root file, a limit).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A redirect from `https` to `http` was refused (see
        /// `HTTPDNSInterceptor.Configuration.allowsInsecureRedirects`).
        public static let insecureRedirect = Code(.insecureRedirect)

        /// A short stable identifier, safe as a metric label or in JSON.
        public var description: String { value.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, for people.
    public var message: String
    /// The URL of the request (or redirect hop) that failed, if known; a password in it is replaced by `***`.
    public var url: String?
    /// The addresses tried, in order, as `IP` strings.
    public var addressesTried: [String]
    /// The underlying error, if any (a `DNSError`, an AsyncHTTPClient or NIO error).
    public var source: (any Error)?

    /// Creates an error.
    public init(
        code: Code, message: String, url: String? = nil, addressesTried: [String] = [], source: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.url = url.map(Redaction.url)
        self.addressesTried = addressesTried
        self.source = source
    }

    /// `code: message (url, tried: …)`.
    public var description: String {
        var text = "\(code): \(message)"
        var context: [String] = []
        if let url { context.append(url) }
        if !addressesTried.isEmpty { context.append("tried \(addressesTried.joined(separator: ", "))") }
        if !context.isEmpty { text += " (\(context.joined(separator: "; ")))" }
        return text
    }

    /// Equal when code, message, URL and addresses are equal (the source is not compared).
    public static func == (lhs: InterceptionError, rhs: InterceptionError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.url == rhs.url
            && lhs.addressesTried == rhs.addressesTried
    }

    /// Hashes the compared fields.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(url)
        hasher.combine(addressesTried)
    }

    /// The `URLError` code URLSession callers see for this error.
    public var urlErrorCode: URLError.Code {
        switch code.value {
        case .badURL, .invalidRequest: .badURL
        case .unsupportedURL: .unsupportedURL
        case .resolutionFailed: .cannotFindHost
        case .connectionFailed: .cannotConnectToHost
        case .connectionLost: .networkConnectionLost
        case .timedOut: .timedOut
        case .certificateRejected: .serverCertificateUntrusted
        case .tlsFailure: .secureConnectionFailed
        case .tooManyRedirects: .httpTooManyRedirects
        case .requestBodyTooLarge, .responseTooLarge: .dataLengthExceedsMaximum
        case .badServerResponse: .badServerResponse
        case .insecureRedirect: .appTransportSecurityRequiresSecureConnection
        case .cancelled: .cancelled
        case .shutdown, .invalidConfiguration: .cannotLoadFromNetwork
        }
    }

    /// This error as a `URLError` with the failing URL and this error as the underlying error.
    public var urlError: URLError {
        var info: [String: Any] = [NSUnderlyingErrorKey: self, NSLocalizedDescriptionKey: description]
        if let url, let parsed = URL(string: url) {
            info[NSURLErrorFailingURLErrorKey] = parsed
        }
        return URLError(urlErrorCode, userInfo: info)
    }

    /// The interception error in `error`: the error itself, or the underlying error of a `URLError` that a
    /// URLSession call threw or passed to its completion handler.
    public init?(_ error: any Error) {
        if let error = error as? InterceptionError {
            self = error
        } else if let error = error as? URLError,
            let underlying = error.userInfo[NSUnderlyingErrorKey] as? InterceptionError
        {
            self = underlying
        } else {
            return nil
        }
    }
}
