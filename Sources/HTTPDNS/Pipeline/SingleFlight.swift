import Synchronization
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// Shares one run of an operation among every caller that asks for the same key while it is in flight.
///
/// The operation runs in a background task, not in any caller, so a caller that is cancelled stops waiting
/// (with `CancellationError`) without failing the others. When the last caller of a flight stops waiting, nobody
/// wants its result any more: the flight is cancelled (its c-ares query or HTTP DNS request with it) and forgotten,
/// and the next caller for the key starts a new one. So upstream work follows the askers: a client that asks and
/// goes away (a reset HTTP/2 stream, a closed connection) leaves nothing running. Background flights
/// (``launchIfIdle(_:_:)``: refreshes nobody waits for) run to the end whoever joins and leaves them.
final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value, any Error>

    private struct Flight {
        var id: Int
        var waiters: [Int: Waiter] = [:]
        /// Started without a caller: never cancelled for want of one.
        var background = false
        /// The running operation, once started.
        var task: Task<Void, Never>?
    }

    private struct State {
        var flights: [Key: Flight] = [:]
        var nextID = 0

        mutating func takeID() -> Int {
            defer { nextID += 1 }
            return nextID
        }
    }

    private let state = Locked(State())
    private let tasks: BackgroundTasks

    init(tasks: BackgroundTasks) {
        self.tasks = tasks
    }

    /// The number of keys in flight.
    var inFlight: Int { state.withLock { $0.flights.count } }

    /// The number of callers waiting on flights.
    var waiting: Int { state.withLock { $0.flights.values.reduce(0) { $0 + $1.waiters.count } } }

    /// Joins the flight for `key`, starting it with `operation` when none is running, and returns its result.
    /// - Throws: The operation's error, `CancellationError` when this caller is cancelled, or
    ///   `HTTPDNSError.Code.shutdown` when the owner is shutting down.
    func run(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let id = state.withLock { $0.takeID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                let flight = state.withLock { state -> Int? in
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return nil
                    }
                    if state.flights[key] != nil {
                        state.flights[key]!.waiters[id] = continuation
                        return nil
                    }
                    let flight = state.takeID()
                    state.flights[key] = Flight(id: flight, waiters: [id: continuation])
                    return flight
                }
                if let flight { launch(key, flight, operation) }
            }
        } onCancel: {
            let (waiter, abandoned) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
                guard var flight = state.flights[key], let waiter = flight.waiters.removeValue(forKey: id) else {
                    return (nil, nil)
                }
                guard flight.waiters.isEmpty, !flight.background else {
                    state.flights[key] = flight
                    return (waiter, nil)
                }
                // Nobody waits any more: forget the flight (a new caller starts afresh) and stop its work.
                state.flights[key] = nil
                return (waiter, flight.task)
            }
            abandoned?.cancel()
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Starts a flight for `key` with no caller waiting (a background refresh) unless one is in flight.
    /// - Returns: Whether a flight was started.
    @discardableResult
    func launchIfIdle(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) -> Bool {
        let flight = state.withLock { state -> Int? in
            guard state.flights[key] == nil else { return nil }
            let flight = state.takeID()
            state.flights[key] = Flight(id: flight, background: true)
            return flight
        }
        if let flight { launch(key, flight, optional: true, operation) }
        return flight != nil
    }

    private func launch(
        _ key: Key, _ flight: Int, optional: Bool = false, _ operation: @escaping @Sendable () async throws -> Value
    ) {
        let task = tasks.start(optional: optional) {
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            self.finish(key, flight, result)
        }
        guard let task else {
            let error =
                optional
                ? HTTPDNSError(code: .internalError, message: "too much background work in flight; skipped")
                : HTTPDNSError(code: .shutdown, message: "the resolver is shut down")
            finish(key, flight, .failure(error))
            return
        }
        // Kept for cancelling; a flight abandoned before this line has no entry any more, so its task ends now.
        let abandoned = state.withLock { state -> Bool in
            guard state.flights[key]?.id == flight else { return true }
            state.flights[key]!.task = task
            return false
        }
        if abandoned { task.cancel() }
    }

    private func finish(_ key: Key, _ flight: Int, _ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [Int: Waiter] in
            // An abandoned flight's entry is gone, or is a newer flight's: that one is not this result's.
            guard state.flights[key]?.id == flight else { return [:] }
            return state.flights.removeValue(forKey: key)?.waiters ?? [:]
        }
        for waiter in waiters.values { waiter.resume(with: result) }
    }
}
