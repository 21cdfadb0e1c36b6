/// An error from a name resolution, with a stable ``code`` and the context it happened in.
///
/// Codes are values of ``DNSError/Code``, a struct rather than an enum so that codes can be added
/// without breaking exhaustive switches in user code. ``Code/description`` is a short stable identifier
/// (`notFound`, `timeout`, …) that is safe to use as a metric label or in JSON.
public struct DNSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Value: String, Hashable, Sendable, CaseIterable {
            case noData, notFound, formatError, serverFailure, notImplemented, refused
            case badQuery, badName, badFamily, badResponse, connectionRefused, timeout, endOfFile
            case fileError, noMemory, shutdown, badString, badFlags, noName, badHints, notInitialized
            case cancelled, badService, invalidServer, invalidConfiguration, internalError
            case questionMismatch, responseTooLarge, httpStatus, tlsFailure, transportFailure
            case privateAddress, signatureExpired, invalidSignature, decryptionFailed, notCached, noRoute
        }

        let value: Value

        init(_ value: Value) { self.value = value }

        /// Whether the code is a definite answer that the name has no address: it does not exist (``notFound``) or
        /// has none of the type asked (``noData``). Such answers are cached as negatives and end a lookup, where
        /// other failures move on to the next upstream.
        package var isNegativeAnswer: Bool { value == .notFound || value == .noData }

        /// The name has no records of the requested type (NOERROR with an empty answer: NODATA).
        public static let noData = Code(.noData)
        /// The name does not exist (NXDOMAIN).
        public static let notFound = Code(.notFound)
        /// The server could not interpret the query (FORMERR).
        package static let formatError = Code(.formatError)
        /// The server failed to answer (SERVFAIL).
        public static let serverFailure = Code(.serverFailure)
        /// The server does not support the query (NOTIMP).
        package static let notImplemented = Code(.notImplemented)
        /// The server refused the query (REFUSED).
        public static let refused = Code(.refused)
        /// The query could not be built.
        package static let badQuery = Code(.badQuery)
        /// The host name is malformed.
        public static let badName = Code(.badName)
        /// The address family is not supported.
        package static let badFamily = Code(.badFamily)
        /// The answer was malformed or did not match the question.
        public static let badResponse = Code(.badResponse)
        /// The server could not be reached (connection refused or reset).
        public static let connectionRefused = Code(.connectionRefused)
        /// No answer arrived in time.
        public static let timeout = Code(.timeout)
        /// The server closed the connection early.
        package static let endOfFile = Code(.endOfFile)
        /// A configuration file could not be read.
        package static let fileError = Code(.fileError)
        /// Memory ran out.
        package static let noMemory = Code(.noMemory)
        /// The resolver was shut down while the query was in flight.
        public static let shutdown = Code(.shutdown)
        /// A string was malformed.
        package static let badString = Code(.badString)
        /// Invalid flags were given.
        package static let badFlags = Code(.badFlags)
        /// The name is not known (and is not a valid numeric address).
        package static let noName = Code(.noName)
        /// Invalid lookup hints were given.
        package static let badHints = Code(.badHints)
        /// The DNS library was not initialised.
        package static let notInitialized = Code(.notInitialized)
        /// The query was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The service name is not known.
        package static let badService = Code(.badService)
        /// A DNS server address is malformed.
        package static let invalidServer = Code(.invalidServer)
        /// A resolver option is out of range.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The answer was for another question than the one asked (name, type or class differ).
        package static let questionMismatch = Code(.questionMismatch)
        /// An HTTP DNS response body was larger than the cap (64 KiB).
        package static let responseTooLarge = Code(.responseTooLarge)
        /// An HTTP DNS endpoint answered with an HTTP status other than 200, or a body of the wrong type.
        public static let httpStatus = Code(.httpStatus)
        /// The TLS handshake failed: an untrusted or expired certificate, or one for another name.
        public static let tlsFailure = Code(.tlsFailure)
        /// An HTTP DNS endpoint could not be reached or the connection broke (refused, reset, closed early).
        public static let transportFailure = Code(.transportFailure)
        /// An HTTP DNS answer mapped a public name to a private, loopback, link-local or unspecified
        /// address, and the provider's private-address guard rejected it.
        public static let privateAddress = Code(.privateAddress)
        /// A signed HTTPDNS request reached the server after its expiry time.
        package static let signatureExpired = Code(.signatureExpired)
        /// The HTTPDNS server rejected the request signature (wrong secret or account).
        package static let invalidSignature = Code(.invalidSignature)
        /// An encrypted HTTPDNS answer could not be decrypted (wrong key, corrupt body).
        package static let decryptionFailed = Code(.decryptionFailed)
        /// Only the cache was asked and it holds nothing usable for the host.
        package static let notCached = Code(.notCached)
        /// The host cannot reach any address of the answer: an IPv4-only name on a host without an IPv4 route, where
        /// NAT64 synthesis is off or no NAT64 prefix was found.
        public static let noRoute = Code(.noRoute)
        /// An unexpected internal failure; the message says which.
        package static let internalError = Code(.internalError)

        /// The stable identifier of the code, e.g. `notFound`.
        public var description: String { value.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// A human-readable explanation.
    public var message: String
    /// The host that was being resolved, if any.
    public var host: String?
    /// The servers that were asked, as `IP:PORT` strings, if known.
    public var servers: [String]
    /// The underlying error, if this one wraps another.
    public var source: (any Error & Sendable)?

    /// Creates an error.
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: A human-readable explanation.
    ///   - host: The host that was being resolved.
    ///   - servers: The servers that were asked.
    ///   - source: The underlying error.
    public init(
        code: Code,
        message: String,
        host: String? = nil,
        servers: [String] = [],
        source: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.host = host
        self.servers = servers
        self.source = source
    }

    /// `code: message (host ..., servers ...)`.
    public var description: String {
        var text = "\(code): \(message)"
        var context: [String] = []
        if let host { context.append("host \(host)") }
        if !servers.isEmpty { context.append("servers \(servers.joined(separator: ","))") }
        if !context.isEmpty { text += " (\(context.joined(separator: ", ")))" }
        if let source { text += " [caused by: \(source)]" }
        return text
    }

    /// Compares code, message, host and servers; the underlying error is not compared.
    public static func == (lhs: DNSError, rhs: DNSError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.host == rhs.host && lhs.servers == rhs.servers
    }
}
