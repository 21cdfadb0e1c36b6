#if canImport(FoundationNetworking)
    public import FoundationNetworking
#else
    public import Foundation
#endif
import AsyncHTTPClient
import Foundation
import HTTPDNS
import NIOCore
import Synchronization
import HTTPDNSCore

/// A `URLProtocol` that sends URLSession's http and https requests to the fastest IP of their host.
///
/// Register it once at start-up with ``register(_:)``, before the process creates its first URLSession, or insert it
/// into a session's configuration with ``install(_:into:)``. For each request it takes (see
/// ``HTTPDNSInterceptor/intercepts(_:)``) it resolves the host through the interceptor's `HostResolver`, rewrites
/// the request to the best IP with the original `Host` header, and sends it over a connection pinned to that IP
/// whose TLS names the real host (SNI and certificate check). The answer reaches the application under the
/// original URL.
///
/// Behaviour to know:
/// - **Every URLSession form behaves as without the library.** Data tasks with a completion handler (and the async
///   `data(for:)` without a delegate) get the body once, whole, bounded by
///   ``HTTPDNSInterceptor/Configuration/maximumResponseBytes``; data tasks on a session with a delegate get each part
///   as it arrives. Forms this platform's protocol client cannot deliver as URLSession would (download and upload
///   tasks, per-task delegates of the async API) are served by URLSession's own HTTP protocol, unchanged.
/// - **Redirects are followed by the protocol** (this platform's URLSession cannot take a redirect from a protocol),
///   each hop resolved again; a task's delegate is asked `willPerformHTTPRedirection` before each one, on the
///   session's delegate queue, as URLSession asks it. `HTTPDNSInterceptor.Configuration.followRedirects` set to
///   `false` delivers the 3xx answer instead.
/// - Data tasks with `httpBody` or `httpBodyStream` are handled.
/// - Cookies come from ``HTTPDNSInterceptor/Configuration/cookieStorage``: a protocol cannot see its session's
///   configuration on this platform.
public class HTTPDNSURLProtocol: URLProtocol {
    // Lock discipline: URLProtocol itself is not Sendable; the load task reaches this instance through ``Handle``.
    // `loading` guards this instance's mutable state (the load task, the stand-in protocol, whether stopLoading ran,
    // whether the load finished). Every call to `client` is made on the session's queue (see ``SessionQueue``: the
    // corelibs client must never be called from another thread), while holding `loading` and after checking
    // `stopped`; stopLoading sets `stopped` under the same lock, so no client call can follow stopLoading. The
    // inherited `request`, `task`, `cachedResponse` and `client` are set by URLSession before startLoading and only
    // read afterwards.
    private struct Loading {
        var task: Task<Void, Never>?
        /// URLSession's own HTTP protocol, serving a task whose form this one cannot deliver (see ``TaskForm``).
        var standIn: StandIn?
        var stopped = false
        var finished = false
    }

    private let loading = Locked(Loading())

    /// Carries the protocol into its load task and onto the session's queue. Both only call ``deliver(_:)``,
    /// which takes `loading` before touching the instance, so the lock discipline above is what makes this sound.
    private struct Handle: @unchecked Sendable {
        let instance: HTTPDNSURLProtocol
    }

    /// URLSession's own protocol standing in for this one. URLSession calls startLoading and stopLoading on the
    /// session's queue, and only those pass the stand-in on, so it is only used there.
    private struct StandIn: @unchecked Sendable {
        let instance: URLProtocol
    }

    /// What the load hands to the client, in order: the response, the body's parts, then the end.
    private enum Event: Sendable {
        case response(HTTPURLResponse)
        case data(Data)
        case finished
        case failed(HTTPDNSError)
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
    /// its own bound to `interceptor` (up to eight such interceptors at once; one that is
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

    /// Tags `request` so that the protocol leaves it to URLSession's own HTTP support, unresolved and unrewritten.
    /// The tag is a reserved header (this platform loses URLProtocol properties on the way); URLSession sends it as it
    /// is.
    public static func markHandled(_ request: inout URLRequest) {
        RequestRewriting.markHandled(&request)
    }

    /// How many interceptors other than the process's can be installed into session configurations at once.
    static var maximumSessionInterceptors: Int { SessionProtocols.classes.count }

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

    /// Whether the protocol takes `task`: not download or upload tasks. (URLSession on this platform never asks;
    /// the protocol finds the task's form when it starts, see `TaskForm`.)
    override public class func canInit(with task: URLSessionTask) -> Bool {
        if task is URLSessionDownloadTask || task is URLSessionUploadTask { return false }
        guard let request = task.currentRequest ?? task.originalRequest else { return false }
        return canInit(with: request)
    }

    /// The request as it is.
    override public class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// URLSession's own protocol classes (HTTP first), for the forms this protocol hands back.
    private static let ownProtocols: [URLProtocol.Type] = (URLSessionConfiguration.default.protocolClasses ?? [])
        .compactMap { $0 as? URLProtocol.Type }.filter { !($0 is HTTPDNSURLProtocol.Type) }

    /// Starts the load. A task whose form the client cannot deliver as URLSession would (see `TaskForm`) is served
    /// by URLSession's own HTTP protocol, unchanged. Otherwise the load runs on a task of its own, off the session's
    /// queue, and what it yields is handed to the client back on the queue this method was called on (the task's
    /// work queue, which URLSession serializes with its own work).
    ///
    /// The load task prefers one of the pinned clients' event loops (`LoadExecutors`, in turn): this queue hops to
    /// the loop, where the exchange starts and its answer resumes the load, and the loop hops back to this queue; two
    /// more when AsyncHTTPClient's connection is on another loop (see `EventLoopTaskExecutor`). A request with an `httpBodyStream` runs on the cooperative pool instead: reading the stream
    /// may block, which an event loop must never do.
    override public func startLoading() {
        let clientQueue = SessionQueue.current()
        let handle = Handle(instance: self)
        // The task's session is read once (by reflection): the form and the redirect hook both need it.
        let session = task.flatMap(TaskForm.session(of:))
        let form = task.map { TaskForm.of($0, in: session) } ?? .collected
        if case .passThrough = form, let task, let standIn = Self.ownProtocol(for: task, cachedResponse: cachedResponse)
        {
            let start = loading.withLock { state -> Bool in
                guard !state.stopped, state.standIn == nil else { return false }
                state.standIn = StandIn(instance: standIn)
                return true
            }
            if start { standIn.startLoading() }
            return
        }
        guard let interceptor = Self.boundInterceptor else {
            let error = HTTPDNSError(
                code: .shutdown, message: "no interceptor is registered", url: request.url?.absoluteString)
            clientQueue.async { _ = handle.instance.deliver(.failed(error)) }
            return
        }
        let request = self.request
        let willRedirect = task.flatMap { Self.redirectHook(for: $0, in: session) }
        let executor = request.httpBodyStream == nil ? interceptor.loadExecutors.take() : nil
        let load: Task<Void, Never>
        if form == .streamed {
            load = Task(executorPreference: executor) {
                do throws(HTTPDNSError) {
                    let answer = try await interceptor.stream(request, willRedirect: willRedirect)
                    guard await clientQueue.run({ handle.instance.deliver(.response(answer.response)) }) else { return }
                    do {
                        for try await part in answer.body {
                            let data = Data(part.readableBytesView)
                            guard await clientQueue.run({ handle.instance.deliver(.data(data)) }) else { return }
                        }
                    } catch {
                        let url = request.url?.absoluteString ?? ""
                        throw PinnedTransport.interceptionError(error, url: Redaction.url(url))
                    }
                    clientQueue.async { _ = handle.instance.deliver(.finished) }
                } catch {
                    clientQueue.async { _ = handle.instance.deliver(.failed(error)) }
                }
            }
        } else {
            load = Task(executorPreference: executor) {
                do throws(HTTPDNSError) {
                    let answer = try await interceptor.load(request, willRedirect: willRedirect)
                    clientQueue.async {
                        let instance = handle.instance
                        guard instance.deliver(.response(answer.response)) else { return }
                        if !answer.body.isEmpty { _ = instance.deliver(.data(answer.body)) }
                        _ = instance.deliver(.finished)
                    }
                } catch {
                    clientQueue.async { _ = handle.instance.deliver(.failed(error)) }
                }
            }
        }
        loading.withLock { state in
            if state.stopped { load.cancel() }
            state.task = load
        }
    }

    /// Cancels the load; the client hears nothing more from this protocol. A stand-in is told to stop as URLSession
    /// would tell it.
    override public func stopLoading() {
        let (task, standIn) = loading.withLock { state in
            state.stopped = true
            return (state.task, state.standIn)
        }
        task?.cancel()
        standIn?.instance.stopLoading()
    }

    /// For a task with a delegate (its own or its session's), asks it before each redirect is followed, on the
    /// session's delegate queue, as URLSession's own HTTP protocol does.
    #if canImport(FoundationNetworking)
        private static func redirectHook(
            for task: URLSessionTask, in session: URLSession?
        ) -> HTTPDNSInterceptor.RedirectHook? {
            guard let delegate = task.delegate, let session else { return nil }
            return { response, request in
                await withCheckedContinuation { continuation in
                    // A delegate that calls the completion handler twice is heard once.
                    let pending = Locked<CheckedContinuation<URLRequest?, Never>?>(continuation)
                    session.delegateQueue.addOperation {
                        delegate.urlSession(
                            session, task: task, willPerformHTTPRedirection: response, newRequest: request
                        ) { next in
                            pending.withLock { waiting in
                                defer { waiting = nil }
                                return waiting
                            }?.resume(returning: next)
                        }
                    }
                }
            }
        }
    #else
        private static func redirectHook(
            for task: URLSessionTask, in session: URLSession?
        ) -> HTTPDNSInterceptor.RedirectHook? { nil }
    #endif

    /// URLSession's own protocol for `task`, made as URLSession makes it.
    private static func ownProtocol(for task: URLSessionTask, cachedResponse: CachedURLResponse?) -> URLProtocol? {
        guard let request = task.currentRequest ?? task.originalRequest,
            let own = ownProtocols.first(where: { $0.canInit(with: request) })
        else { return nil }
        return own.init(task: task, cachedResponse: cachedResponse, client: nil)
    }

    /// Hands one event to the client, unless stopLoading came first or the load already ended. Runs on the session's
    /// queue.
    /// - Returns: Whether the load goes on (the event was delivered and was not its end).
    private func deliver(_ event: Event) -> Bool {
        loading.withLock { state in
            guard !state.stopped, !state.finished, let client else { return false }
            switch event {
            case .response(let response):
                client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
                return true
            case .data(let data):
                client.urlProtocol(self, didLoad: data)
                return true
            case .finished:
                state.finished = true
                state.task = nil
                client.urlProtocolDidFinishLoading(self)
            case .failed(let error):
                state.finished = true
                state.task = nil
                client.urlProtocol(self, didFailWithError: error.urlError)
            }
            return false
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
