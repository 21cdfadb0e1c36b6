/// The library's one error: from a name resolution, a request one of the fronts sent to a chosen address, or a
/// configuration, with a stable ``code`` and the context it happened in.
///
/// Codes are values of ``HTTPDNSError/Code``, a struct rather than an enum so that codes can be added without
/// breaking exhaustive switches in user code. ``Code/description`` is a short stable identifier (`notFound`,
/// `timeout`, …) that is safe to use as a metric label or in JSON. Which context fields are set depends on where the
/// error comes from: ``host`` and ``servers`` for a resolution, ``url`` and ``servers`` (the addresses tried) for a
/// request, ``diagnostics`` for a configuration file. URLSession callers receive a request's error wrapped in a
/// `URLError` with the matching code; `HTTPDNSError(error)` takes it out again.
public struct HTTPDNSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        package enum Value: String, Hashable, Sendable, CaseIterable {
            case noData, notFound, formatError, serverFailure, notImplemented, refused
            case badQuery, badName, badFamily, badResponse, timeout, endOfFile
            case fileError, noMemory, shutdown, badString, badFlags, noName, badHints, notInitialized
            case cancelled, badService, invalidServer, invalidConfiguration, internalError
            case questionMismatch, responseTooLarge, httpStatus, tlsFailure
            case privateAddress, signatureExpired, invalidSignature, decryptionFailed, notCached, noRoute
            case badURL, unsupportedURL, resolutionFailed, connectionFailed, connectionLost, certificateRejected
            case tooManyRedirects, requestBodyTooLarge, invalidRequest, insecureRedirect, listenFailed
        }

        package let value: Value

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
        /// The answer was malformed: a DNS or HTTP DNS answer that does not parse or does not match the question, or
        /// a response to a request that is not valid HTTP.
        public static let badResponse = Code(.badResponse)
        /// No answer arrived in time: a DNS query, or a request's connect, exchange or resolution budget.
        public static let timeout = Code(.timeout)
        /// The server closed the connection early.
        package static let endOfFile = Code(.endOfFile)
        /// A file c-ares reads (resolv.conf, hosts) could not be read.
        package static let fileError = Code(.fileError)
        /// Memory ran out.
        package static let noMemory = Code(.noMemory)
        /// The resolver or the front was shut down while the query or request was in flight.
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
        /// The query or the request was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The service name is not known.
        package static let badService = Code(.badService)
        /// A DNS server address is malformed.
        package static let invalidServer = Code(.invalidServer)
        /// A configuration cannot be used: a resolver option out of range, a settings or overrides file that cannot
        /// be read or has errors (``HTTPDNSError/diagnostics`` lists them), an unreadable trust-root file.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The answer was for another question than the one asked (name, type or class differ).
        package static let questionMismatch = Code(.questionMismatch)
        /// A response body was larger than its cap: 64 KiB for an HTTP DNS answer, the front's
        /// `maximumResponseBytes` for a request.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// An HTTP DNS endpoint answered with an HTTP status other than 200, or a body of the wrong type.
        public static let httpStatus = Code(.httpStatus)
        /// The TLS handshake failed for a reason other than the certificate (see ``certificateRejected``), for an HTTP
        /// DNS endpoint and a request alike.
        public static let tlsFailure = Code(.tlsFailure)
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

        /// A request's URL is malformed or has no host.
        public static let badURL = Code(.badURL)
        /// A request's scheme is not `http` or `https`.
        public static let unsupportedURL = Code(.unsupportedURL)
        /// A request's host could not be resolved; the ``HTTPDNSError/source`` is the resolver's error.
        public static let resolutionFailed = Code(.resolutionFailed)
        /// No connection could be made (refused, reset, unreachable): to a DNS server, an HTTP DNS endpoint, a probed
        /// address, or any address a request tried.
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection closed before the whole response arrived (an HTTP DNS endpoint's or a request's).
        public static let connectionLost = Code(.connectionLost)
        /// The server's certificate (an HTTP DNS endpoint's or a request's) was rejected for the real host name: an
        /// untrusted or expired certificate or one for another name; never retried on another address.
        public static let certificateRejected = Code(.certificateRejected)
        /// A request's redirect limit was reached.
        public static let tooManyRedirects = Code(.tooManyRedirects)
        /// A request body (a stream) is larger than the cap.
        public static let requestBodyTooLarge = Code(.requestBodyTooLarge)
        /// A request cannot be sent as it is (an invalid header name or value, a body stream that fails).
        public static let invalidRequest = Code(.invalidRequest)
        /// A redirect from `https` to `http` was refused (see `ConnectionPolicy.allowsInsecureRedirects`).
        public static let insecureRedirect = Code(.insecureRedirect)
        /// A listener could not be opened: its address is in use, not on this host, or needs privileges (the message
        /// names the listener and the address).
        public static let listenFailed = Code(.listenFailed)

        /// The stable identifier of the code, e.g. `notFound`.
        public var description: String { value.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// A human-readable explanation.
    public var message: String
    /// The host that was being resolved, if any.
    public var host: String?
    /// The servers asked or tried, in order: DNS servers and HTTP DNS endpoints as `IP:PORT` strings or URLs, the
    /// addresses a request tried as `IP` strings.
    public var servers: [String]
    /// The URL of the request (or redirect hop) that failed, if any; a password in it is replaced by `***`.
    public var url: String?
    /// Every problem found in a configuration file, with positions.
    public var diagnostics: [ConfigDiagnostic]
    /// The underlying error, if this one wraps another (a resolver's error, an AsyncHTTPClient or NIO error).
    public var source: (any Error)?

    /// Creates an error; give the context fields that apply.
    public init(
        code: Code,
        message: String,
        host: String? = nil,
        url: String? = nil,
        servers: [String] = [],
        diagnostics: [ConfigDiagnostic] = [],
        source: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.host = host
        self.servers = servers
        self.url = url.map(Redaction.url)
        self.diagnostics = diagnostics
        self.source = source
    }

    /// `code: message (host …, url, servers …)`, then one diagnostic a line.
    public var description: String {
        var text = "\(code): \(message)"
        var context: [String] = []
        if let host { context.append("host \(host)") }
        if let url { context.append(url) }
        if !servers.isEmpty { context.append("servers \(servers.joined(separator: ", "))") }
        if !context.isEmpty { text += " (\(context.joined(separator: "; ")))" }
        if let source { text += " [caused by: \(source)]" }
        return ([text] + diagnostics.map(\.description)).joined(separator: "\n")
    }

    /// Compares everything but the underlying error.
    public static func == (lhs: HTTPDNSError, rhs: HTTPDNSError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.host == rhs.host && lhs.servers == rhs.servers
            && lhs.url == rhs.url && lhs.diagnostics == rhs.diagnostics
    }
}
