#if canImport(FoundationNetworking)
    internal import CSessionQueue

    /// The serial queue URLSession called a protocol method on, kept so every later call to the protocol's client is
    /// made on it.
    ///
    /// swift-corelibs-foundation's `URLProtocolClient` (`_ProtocolClient`) is not thread-safe. Each of its methods
    /// looks the task up in the session's task registry (`URLSession.behaviour(for:)` reads `_TaskRegistry`, a plain
    /// dictionary that "must only be accessed on the owning session's work queue"), and the session adds and removes
    /// other tasks' entries on that queue. A client call from any other thread races with those writes and crashes
    /// (a bad pointer dereference inside `behaviour(for:)`) as soon as two requests run at once.
    ///
    /// The session never exposes its work queue, but it calls `startLoading()` and `stopLoading()` from blocks on the
    /// task's own work queue, a serial queue that targets the session's. Capturing the current queue inside
    /// `startLoading()` therefore gives a queue on which the client may be called: blocks submitted to it run one at a
    /// time, in order with the session's own registry updates and with `stopLoading()`. libdispatch's
    /// `dispatch_get_current_queue()` is deprecated (it cannot be trusted in general, since a block may run on a queue
    /// that targets another), but here it is asked exactly where corelibs documents which queue runs the code, and the
    /// innermost queue, the task's, is the one wanted. The task queue is reached through a small C shim that retains it.
    final class SessionQueue: @unchecked Sendable {
        // Sendable: the reference is set once and libdispatch queues may be used from any thread.
        private let queue: httpdns_session_queue_ref

        /// The queue the caller runs on (retained until this object is released).
        static func current() -> SessionQueue {
            SessionQueue(queue: httpdns_session_queue_current())
        }

        private init(queue: httpdns_session_queue_ref) {
            self.queue = queue
        }

        deinit {
            httpdns_session_queue_release(queue)
        }

        /// Runs `work` on the queue, asynchronously.
        func async(_ work: @escaping @Sendable () -> Void) {
            let box = Unmanaged.passRetained(WorkBox(work)).toOpaque()
            httpdns_session_queue_async(queue, box) { context in
                guard let context else { return }
                Unmanaged<WorkBox>.fromOpaque(context).takeRetainedValue().work()
            }
        }

        /// Runs `work` on the queue and waits for it.
        func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
            await withCheckedContinuation { continuation in
                self.async { continuation.resume(returning: work()) }
            }
        }

        private final class WorkBox {
            let work: @Sendable () -> Void
            init(_ work: @escaping @Sendable () -> Void) { self.work = work }
        }
    }
#else
    /// On Apple platforms the URL loading system's protocol client may be called from any thread: work runs at once.
    final class SessionQueue: Sendable {
        static func current() -> SessionQueue { SessionQueue() }
        func async(_ work: @escaping @Sendable () -> Void) { work() }
        func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T { work() }
    }
#endif
