import Synchronization
import HTTPDNSCore

/// What c-ares delivered for one query: the parsed addresses, or a failure status.
enum CAresReply: Sendable {
    case addresses([ResolvedAddress])
    /// The whole answer to a message sent as it was (``CAresQuery/message``).
    case message([UInt8])
    case failure(Int32)
}

/// One query in flight: its question and the continuation of the task waiting for it.
///
/// The event loop retains the context while c-ares owns it (passed as the callback's `void *`).
/// Exactly one of completion and cancellation resumes the continuation; the other finds nobody waiting.
final class CAresQuery: Sendable {
    private enum State {
        /// Created; no continuation yet.
        case idle
        /// A task waits for the answer.
        case waiting(UnsafeContinuation<CAresReply, any Error>)
        /// The task was cancelled; a late answer is dropped.
        case cancelled
        /// The answer was delivered.
        case finished
    }

    let name: String
    let type: DNSRecordType
    /// A whole DNS message to send as it is (c-ares picks its ID); the reply is then the whole answer.
    let message: [UInt8]?
    private let state = Locked<State>(.idle)

    init(name: String, type: DNSRecordType) {
        self.name = name
        self.type = type
        self.message = nil
    }

    init(message: [UInt8]) {
        self.name = ""
        self.type = .a
        self.message = message
    }

    /// Stores the waiting task's continuation.
    /// - Returns: `false` when the task was cancelled first (the continuation was resumed with `CancellationError`).
    func install(_ continuation: UnsafeContinuation<CAresReply, any Error>) -> Bool {
        let installed = state.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .waiting(continuation)
            return true
        }
        if !installed { continuation.resume(throwing: CancellationError()) }
        return installed
    }

    /// Whether the waiting task gave up; the loop then does not send the query at all.
    var isCancelled: Bool {
        state.withLock { state in
            if case .cancelled = state { return true }
            return false
        }
    }

    /// Called from the task's cancellation handler: the caller gets `CancellationError` at once.
    func cancel() {
        let continuation = state.withLock { state -> UnsafeContinuation<CAresReply, any Error>? in
            switch state {
            case .waiting(let continuation):
                state = .cancelled
                return continuation
            case .idle:
                state = .cancelled
                return nil
            case .cancelled, .finished:
                return nil
            }
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// Called on the event loop when c-ares is done with the query; dropped when nobody waits any more.
    func complete(_ reply: CAresReply) {
        let continuation = state.withLock { state -> UnsafeContinuation<CAresReply, any Error>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .finished
            return continuation
        }
        continuation?.resume(returning: reply)
    }
}
