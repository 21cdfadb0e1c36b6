#if canImport(FoundationNetworking)
public import FoundationNetworking
#else
public import Foundation
#endif
import Foundation
import Synchronization

/// A `URLProtocol` that sends URLSession's http and https requests to the fastest IP of their host.
///
/// Register it once at start-up with ``register(_:)``, before the process creates its first URLSession, or insert it
/// into a session's configuration with ``install(into:)``. For each request it takes (see
/// ``HTTPDNSInterceptor/intercepts(_:)``) it resolves the host through the interceptor's ``HostResolver``, rewrites
/// the request to the best IP with the original `Host` header, and sends it over a connection pinned to that IP
/// whose TLS names the real host (SNI and certificate check). The answer reaches the application under the
/// original URL.
///
/// Behaviour to know:
/// - **Bodies are delivered once**, whole, to completion-handler, async and delegate callers alike (this platform's
///   URLSession keeps only the last chunk for the first two). ``HTTPDNSInterceptor/Configuration/maximumResponseBytes``
///   bounds them.
/// - **Redirects are followed by the protocol** (this platform's URLSession cannot take a redirect from a protocol),
///   so a delegate's `willPerformHTTPRedirection` is not called; ``HTTPDNSInterceptor/Configuration/followRedirects``
///   set to `false` delivers the 3xx answer instead.
/// - Download and upload tasks are left to URLSession's own HTTP support (their bodies and files are not visible to
///   a protocol here); data tasks with `httpBody` or `httpBodyStream` are handled.
/// - Cookies come from ``HTTPDNSInterceptor/Configuration/cookieStorage``: a protocol cannot see its session's
///   configuration on this platform.
public final class HTTPDNSURLProtocol: URLProtocol {
    // Lock discipline: URLProtocol itself is not Sendable; the load task reaches this instance through ``Handle``.
    // `loading` guards this instance's mutable state (the load task, whether stopLoading ran, whether the load
    // finished). Every call to `client` is made on the session's queue (see ``SessionQueue``: the
    // corelibs client must never be called from another thread), while holding `loading` and after checking
    // `stopped`; stopLoading sets `stopped` under the same lock, so no client call can follow stopLoading. The
    // inherited `request` and `client` are set by URLSession before startLoading and only read afterwards.
    private struct Loading {
        var task: Task<Void, Never>?
        var stopped = false
        var finished = false
    }

    private let loading = Mutex(Loading())

    /// Carries the protocol into its load task and onto the session's queue. Both only call ``deliver(_:)``,
    /// which takes `loading` before touching the instance, so the lock discipline above is what makes this sound.
    private struct Handle: @unchecked Sendable {
        let instance: HTTPDNSURLProtocol
    }

    /// The process's interceptor; `nil` until ``register(_:)`` or ``install(_:into:)``.
    private static let current = Mutex<HTTPDNSInterceptor?>(nil)

    /// The interceptor requests go through, if one is registered.
    public static var interceptor: HTTPDNSInterceptor? { current.withLock { $0 } }

    /// Registers `interceptor` and the protocol class globally, so `URLSession.shared` and sessions created from
    /// the default configurations use it.
    ///
    /// Call it at start-up, **before the process creates its first URLSession of any kind**: on this platform
    /// `URLSession.shared` copies the registered classes when it is first used, and a session made with its own
    /// configuration never consults global registrations (use ``install(_:into:)`` for those). One interceptor
    /// serves the whole process; registering another replaces it.
    public static func register(_ interceptor: HTTPDNSInterceptor) {
        current.withLock { $0 = interceptor }
        _ = URLProtocol.registerClass(HTTPDNSURLProtocol.self)
    }

    /// Inserts the protocol first into `configuration.protocolClasses` and makes `interceptor` the process's
    /// interceptor. Sessions created from `configuration` afterwards are intercepted.
    public static func install(_ interceptor: HTTPDNSInterceptor, into configuration: URLSessionConfiguration) {
        current.withLock { $0 = interceptor }
        var classes = configuration.protocolClasses ?? []
        classes.removeAll { ObjectIdentifier($0) == ObjectIdentifier(HTTPDNSURLProtocol.self) }
        classes.insert(HTTPDNSURLProtocol.self, at: 0)
        configuration.protocolClasses = classes
    }

    /// Stops interception everywhere: unregisters the class and forgets the interceptor, so sessions that still list
    /// the class let every request through to URLSession's own HTTP support. Requests in flight finish.
    public static func unregister() {
        URLProtocol.unregisterClass(HTTPDNSURLProtocol.self)
        current.withLock { $0 = nil }
    }

    /// Whether the protocol takes `request` (see ``HTTPDNSInterceptor/intercepts(_:)``).
    override public class func canInit(with request: URLRequest) -> Bool {
        guard let interceptor else { return false }
        return interceptor.intercepts(request)
    }

    /// Whether the protocol takes `task`: data tasks only (see the type's discussion).
    override public class func canInit(with task: URLSessionTask) -> Bool {
        if task is URLSessionDownloadTask || task is URLSessionUploadTask { return false }
        guard let request = task.currentRequest ?? task.originalRequest else { return false }
        return canInit(with: request)
    }

    /// The request as it is.
    override public class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// Starts the load on a task of its own, off the session's queue; the outcome is handed to the client back on
    /// the queue this method was called on (the task's work queue, which URLSession serializes with its own work).
    override public func startLoading() {
        let clientQueue = SessionQueue.current()
        let handle = Handle(instance: self)
        guard let interceptor = Self.interceptor else {
            let error = InterceptionError(
                code: .shutdown, message: "no interceptor is registered", url: request.url?.absoluteString)
            clientQueue.async { handle.instance.deliver(.failure(error)) }
            return
        }
        let request = self.request
        let task = Task {
            let outcome: Result<HTTPDNSInterceptor.Response, InterceptionError>
            do throws(InterceptionError) {
                outcome = .success(try await interceptor.load(request))
            } catch {
                outcome = .failure(error)
            }
            clientQueue.async { handle.instance.deliver(outcome) }
        }
        loading.withLock { state in
            if state.stopped { task.cancel() }
            state.task = task
        }
    }

    /// Cancels the load; the client hears nothing more from this protocol.
    override public func stopLoading() {
        let task = loading.withLock { state in
            state.stopped = true
            return state.task
        }
        task?.cancel()
    }

    /// Hands the outcome to the client, unless stopLoading came first. Runs on the session's queue.
    private func deliver(_ outcome: Result<HTTPDNSInterceptor.Response, InterceptionError>) {
        loading.withLock { state in
            guard !state.stopped, !state.finished, let client else { return }
            state.finished = true
            state.task = nil
            switch outcome {
            case .success(let answer):
                client.urlProtocol(self, didReceive: answer.response, cacheStoragePolicy: .notAllowed)
                if !answer.body.isEmpty { client.urlProtocol(self, didLoad: answer.body) }
                client.urlProtocolDidFinishLoading(self)
            case .failure(let error):
                client.urlProtocol(self, didFailWithError: error.urlError)
            }
        }
    }
}
