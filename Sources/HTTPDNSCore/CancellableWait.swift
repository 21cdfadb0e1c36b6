/// A wait for work that cannot be interrupted (a blocking `getaddrinfo`, a connection attempt others share), which
/// the waiting task can still leave: it ends once, with the work's result or, first, with `CancellationError` when
/// the task is cancelled. The work then runs on unwatched and its result is dropped.
package final class CancellableWait<Value: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Value, any Error>)
        case ended
    }

    private let state = Locked(State.idle)

    private init() {}

    /// Waits for the result `start` is given the wait to deliver through ``finish(_:)``. `start` runs at once, on
    /// the caller's thread, unless the task is already cancelled.
    /// - Throws: The result's error, or `CancellationError` when the task is cancelled before the result comes.
    package static func value(_ start: (CancellableWait<Value>) -> Void) async throws -> Value {
        let wait = CancellableWait<Value>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard wait.install(continuation) else { return }
                start(wait)
            }
        } onCancel: {
            wait.finish(.failure(CancellationError()))
        }
    }

    /// Ends the wait with `result`, unless it has ended already.
    package func finish(_ result: Result<Value, any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            switch state {
            case .waiting(let continuation):
                state = .ended
                return continuation
            case .idle:
                state = .ended
                return nil
            case .ended:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    /// Keeps the caller's continuation; `false` (the continuation resumed with `CancellationError`) when the task
    /// was cancelled first.
    private func install(_ continuation: CheckedContinuation<Value, any Error>) -> Bool {
        let ended = state.withLock { state -> Bool in
            guard case .idle = state else { return true }
            state = .waiting(continuation)
            return false
        }
        if ended { continuation.resume(throwing: CancellationError()) }
        return !ended
    }
}
