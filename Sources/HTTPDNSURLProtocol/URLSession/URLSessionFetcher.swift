#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
package import HTTPDNS
package import Logging
import Synchronization
import HTTPDNSCore

/// Performs requests through URLSession with ``HTTPDNSURLProtocol`` in front, and reports what the protocol did
/// (the IP of each hop, failovers, timings). Used by `hostsctl fetch`; its types keep FoundationNetworking out of
/// callers.
///
/// Any number of requests may run at once: each result carries its own request's trace (matched through
/// ``RequestTrace/tagHeader``, which never goes on the wire).
package final class URLSessionFetcher: Sendable {
    /// Which URLSession requests go through.
    package enum SessionKind: Sendable {
        /// `URLSession.shared`, after a global ``HTTPDNSURLProtocol/register(_:)``: the pattern an application
        /// uses. Create the fetcher before anything in the process touches URLSession.
        case shared
        /// A session of its own whose configuration lists the protocol first.
        case dedicated
    }

    /// A request to make.
    package struct Request: Sendable {
        /// The URL, `http` or `https`.
        var url: String
        /// The method (default `GET`).
        var method: String
        /// Extra header fields.
        var headers: [(name: String, value: String)]
        /// The body, if any.
        var body: [UInt8]?
        /// The request's `timeoutInterval` (default 60 s).
        var timeout: Duration

        /// Creates a request.
        package init(
            url: String, method: String = "GET", headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
            timeout: Duration = .seconds(60)
        ) {
            self.url = url
            self.method = method
            self.headers = headers
            self.body = body
            self.timeout = timeout
        }
    }

    /// The answer URLSession delivered, with the protocol's trace.
    package struct Result: Sendable {
        /// The HTTP status.
        package var status: Int
        /// The URL of the answer (the last hop's, with the real host).
        var url: String
        /// The response headers.
        var headers: [String: String]
        /// The body.
        package var body: [UInt8]
        /// What the protocol did; `nil` when the request was not intercepted (an IP literal, a host outside the
        /// scope).
        package var trace: RequestTrace?
        /// From the URLSession call to the whole answer.
        package var elapsed: Duration
    }

    /// The interceptor behind the protocol.
    let interceptor: HTTPDNSInterceptor
    private let session: URLSession
    private let ownsSession: Bool
    private let traces: PendingTraces

    /// Creates the interceptor and registers it (``SessionKind/shared``) or installs it into a session of its own.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` from the interceptor.
    package init(
        resolver: HostResolver,
        configuration: HTTPDNSInterceptor.Configuration,
        session kind: SessionKind = .shared,
        logger: Logger = Logger(label: "httpdns.fetch", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(HTTPDNSError) {
        let traces = PendingTraces()
        var configuration = configuration
        let userHandler = configuration.connection.traceHandler
        configuration.connection.traceHandler = { trace in
            traces.deliver(trace)
            userHandler?(trace)
        }
        let interceptor = try HTTPDNSInterceptor(resolver: resolver, configuration: configuration, logger: logger)
        switch kind {
        case .shared:
            HTTPDNSURLProtocol.register(interceptor)
            session = URLSession.shared
            ownsSession = false
        case .dedicated:
            let sessionConfiguration = URLSessionConfiguration.ephemeral
            HTTPDNSURLProtocol.install(interceptor, into: sessionConfiguration)
            session = URLSession(configuration: sessionConfiguration)
            ownsSession = true
        }
        self.interceptor = interceptor
        self.traces = traces
    }

    /// Performs `request` through URLSession.
    /// - Throws: `HTTPDNSError`: the protocol's own, or one made from URLSession's error for a request the
    ///   protocol did not take.
    package func fetch(_ request: Request) async throws(HTTPDNSError) -> Result {
        guard let url = URL(string: request.url), url.host != nil else {
            throw HTTPDNSError(code: .badURL, message: "not an absolute URL", url: request.url)
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.addValue(value, forHTTPHeaderField: name) }
        if let body = request.body { urlRequest.httpBody = Data(body) }
        urlRequest.timeoutInterval = request.timeout.fractionalSeconds
        let tag = interceptor.intercepts(urlRequest) ? traces.open() : nil
        if let tag { urlRequest.setValue(tag, forHTTPHeaderField: RequestTrace.tagHeader) }
        defer { if let tag { traces.close(tag) } }
        let started = ContinuousClock.now
        do {
            let (data, response) = try await session.data(for: urlRequest)
            let elapsed = ContinuousClock.now - started
            guard let http = response as? HTTPURLResponse else {
                throw HTTPDNSError(code: .badResponse, message: "not an HTTP response", url: request.url)
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return Result(
                status: http.statusCode, url: http.url?.absoluteString ?? request.url, headers: headers,
                body: Array(data),
                trace: tag.flatMap(traces.trace), elapsed: elapsed)
        } catch let error as HTTPDNSError {
            throw error
        } catch {
            if let intercepted = HTTPDNSError(error) { throw intercepted }
            throw HTTPDNSError(
                code: Self.code(for: (error as? URLError)?.code), message: "\(error.localizedDescription)",
                url: request.url, source: error)
        }
    }

    /// Stops interception and closes the interceptor's connections.
    package func shutdown() async {
        if ownsSession { session.finishTasksAndInvalidate() }
        HTTPDNSURLProtocol.unregister()
        await interceptor.shutdown()
    }

    private static func code(for code: URLError.Code?) -> HTTPDNSError.Code {
        switch code {
        case .timedOut?: .timeout
        case .cannotFindHost?, .dnsLookupFailed?: .resolutionFailed
        case .cancelled?: .cancelled
        case .badURL?: .badURL
        case .unsupportedURL?: .unsupportedURL
        case .serverCertificateUntrusted?, .serverCertificateHasBadDate?, .serverCertificateHasUnknownRoot?,
            .serverCertificateNotYetValid?:
            .certificateRejected
        case .secureConnectionFailed?: .tlsFailure
        case .networkConnectionLost?: .connectionLost
        default: .connectionFailed
        }
    }
}

/// The traces of the fetcher's requests in flight, by tag.
private final class PendingTraces: Sendable {
    private struct State {
        var next: UInt64 = 0
        var traces: [String: RequestTrace?] = [:]
    }
    private let state = Locked(State())

    /// A new tag, awaiting its trace.
    func open() -> String {
        state.withLock { state in
            state.next += 1
            let tag = "fetch-\(state.next)"
            state.traces[tag] = .some(nil)
            return tag
        }
    }

    /// Keeps `trace` if its request is still awaited (a late trace of a finished request is dropped).
    func deliver(_ trace: RequestTrace) {
        guard let tag = trace.tag else { return }
        state.withLock { state in
            if state.traces[tag] != nil { state.traces[tag] = .some(trace) }
        }
    }

    /// The trace delivered for `tag`, if any.
    func trace(_ tag: String) -> RequestTrace? {
        state.withLock { $0.traces[tag] ?? nil }
    }

    /// Forgets `tag`.
    func close(_ tag: String) {
        _ = state.withLock { $0.traces.removeValue(forKey: tag) }
    }
}
