#if canImport(FoundationNetworking)
    public import FoundationNetworking
#else
    public import Foundation
#endif
import Foundation
import HTTPDNS
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
public class HTTPDNSURLProtocol: URLProtocol {
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

    private let loading = Locked(Loading())

    /// Carries the protocol into its load task and onto the session's queue. Both only call ``deliver(_:)``,
    /// which takes `loading` before touching the instance, so the lock discipline above is what makes this sound.
    private struct Handle: @unchecked Sendable {
        let instance: HTTPDNSURLProtocol
    }

    /// The process's interceptor; `nil` until ``register(_:)`` or ``install(_:into:)``.
    private static let current = Locked<HTTPDNSInterceptor?>(nil)

    /// The interceptor requests go through, if one is registered.
    public static var interceptor: HTTPDNSInterceptor? { current.withLock { $0 } }

    /// The interceptor of this class: the process's for ``HTTPDNSURLProtocol`` itself, a session's own for the
    /// subclasses ``install(_:into:)`` hands out.
    class var boundInterceptor: HTTPDNSInterceptor? { interceptor }

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

    /// Inserts the protocol first into `configuration.protocolClasses`, bound to `interceptor`. Sessions created from
    /// `configuration` afterwards are intercepted by it.
    ///
    /// When no process-wide interceptor is registered, `interceptor` becomes it (as with ``register(_:)``, without
    /// registering the class globally). When another one is, it stays: the configuration gets a protocol class of
    /// its own bound to `interceptor` (up to ``maximumSessionInterceptors`` interceptors at once; one that is
    /// released frees its class). A configuration with a proxy (`connectionProxyDictionary`) is left unchanged, so
    /// its sessions go through the proxy as without the library.
    /// - Returns: Whether the protocol was inserted.
    @discardableResult
    public static func install(_ interceptor: HTTPDNSInterceptor, into configuration: URLSessionConfiguration) -> Bool {
        if let proxies = configuration.connectionProxyDictionary, !proxies.isEmpty { return false }
        let chosen: HTTPDNSURLProtocol.Type? = current.withLock { current in
            if current == nil || current === interceptor {
                current = interceptor
                return HTTPDNSURLProtocol.self
            }
            return SessionProtocols.bind(interceptor)
        }
        guard let chosen else { return false }
        var classes = configuration.protocolClasses ?? []
        classes.removeAll { $0 is HTTPDNSURLProtocol.Type }
        classes.insert(chosen, at: 0)
        configuration.protocolClasses = classes
        return true
    }

    /// How many interceptors other than the process's can be installed into session configurations at once.
    public static var maximumSessionInterceptors: Int { SessionProtocols.classes.count }

    /// Stops interception everywhere: unregisters the class and forgets the interceptor, so sessions that still list
    /// the class let every request through to URLSession's own HTTP support. Requests in flight finish.
    public static func unregister() {
        URLProtocol.unregisterClass(HTTPDNSURLProtocol.self)
        current.withLock { $0 = nil }
    }

    /// Whether the protocol takes `request` (see ``HTTPDNSInterceptor/intercepts(_:)``).
    override public class func canInit(with request: URLRequest) -> Bool {
        guard let interceptor = boundInterceptor else { return false }
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
        guard let interceptor = Self.boundInterceptor else {
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

/// The protocol classes that bind a session configuration to an interceptor of its own. URLSession takes protocol
/// *classes*, so each interceptor installed next to the process's needs a distinct class; a fixed set of subclasses
/// is handed out and taken back when their interceptor is released.
enum SessionProtocols {
    /// Weak, so a slot frees itself when its interceptor goes away.
    private struct Slot {
        weak var interceptor: HTTPDNSInterceptor?
    }

    static let classes: [HTTPDNSURLProtocol.Type] = [
        SessionProtocol0.self, SessionProtocol1.self, SessionProtocol2.self, SessionProtocol3.self,
        SessionProtocol4.self, SessionProtocol5.self, SessionProtocol6.self, SessionProtocol7.self,
    ]

    private static let slots = Locked([Slot](repeating: Slot(), count: 8))

    /// The class bound to `interceptor`, binding a free one if needed; `nil` when every class is taken.
    static func bind(_ interceptor: HTTPDNSInterceptor) -> HTTPDNSURLProtocol.Type? {
        slots.withLock { slots in
            if let index = slots.firstIndex(where: { $0.interceptor === interceptor }) { return classes[index] }
            guard let free = slots.firstIndex(where: { $0.interceptor == nil }) else { return nil }
            slots[free].interceptor = interceptor
            return classes[free]
        }
    }

    static func interceptor(at index: Int) -> HTTPDNSInterceptor? {
        slots.withLock { $0[index].interceptor }
    }
}

// Eight subclasses that differ only in the slot they read their interceptor from.
final class SessionProtocol0: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 0) }
}
final class SessionProtocol1: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 1) }
}
final class SessionProtocol2: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 2) }
}
final class SessionProtocol3: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 3) }
}
final class SessionProtocol4: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 4) }
}
final class SessionProtocol5: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 5) }
}
final class SessionProtocol6: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 6) }
}
final class SessionProtocol7: HTTPDNSURLProtocol {
    override class var boundInterceptor: HTTPDNSInterceptor? { SessionProtocols.interceptor(at: 7) }
}
