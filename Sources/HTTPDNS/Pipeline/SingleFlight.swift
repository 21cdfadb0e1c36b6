import Synchronization
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// Shares one run of an operation among every caller that asks for the same key while it is in flight.
///
/// The operation runs in a background task, not in any caller, so a caller that is cancelled stops waiting
/// (with `CancellationError`) without failing the others or abandoning the work.
final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value, any Error>

    private struct State {
        var flights: [Key: [Int: Waiter]] = [:]
        var nextWaiter = 0
    }

    private let state = Locked(State())
    private let tasks: BackgroundTasks

    init(tasks: BackgroundTasks) {
        self.tasks = tasks
    }

    /// The number of keys in flight.
    var inFlight: Int { state.withLock { $0.flights.count } }

    /// The number of callers waiting on flights.
    var waiting: Int { state.withLock { $0.flights.values.reduce(0) { $0 + $1.count } } }

    /// Joins the flight for `key`, starting it with `operation` when none is running, and returns its result.
    /// - Throws: The operation's error, `CancellationError` when this caller is cancelled, or
    ///   ``DNSError/Code/shutdown`` when the owner is shutting down.
    func run(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                let start = state.withLock { state -> Bool in
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return false
                    }
                    if state.flights[key] != nil {
                        state.flights[key]![id] = continuation
                        return false
                    }
                    state.flights[key] = [id: continuation]
                    return true
                }
                if start { launch(key, operation) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                state.flights[key]?.removeValue(forKey: id)
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Starts a flight for `key` with no caller waiting (a background refresh) unless one is in flight.
    /// - Returns: Whether a flight was started.
    @discardableResult
    func launchIfIdle(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) -> Bool {
        let start = state.withLock { state -> Bool in
            guard state.flights[key] == nil else { return false }
            state.flights[key] = [:]
            return true
        }
        if start { launch(key, optional: true, operation) }
        return start
    }

    private func launch(_ key: Key, optional: Bool = false, _ operation: @escaping @Sendable () async throws -> Value) {
        let started = tasks.spawn(optional: optional) {
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            self.finish(key, result)
        }
        if !started {
            let error =
                optional
                ? DNSError(code: .internalError, message: "too much background work in flight; skipped")
                : DNSError(code: .shutdown, message: "the resolver is shut down")
            finish(key, .failure(error))
        }
    }

    private func finish(_ key: Key, _ result: Result<Value, any Error>) {
        let waiters = state.withLock { $0.flights.removeValue(forKey: key) } ?? [:]
        for waiter in waiters.values { waiter.resume(with: result) }
    }
}
