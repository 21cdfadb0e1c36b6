import Synchronization
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// Shares one run of an operation among every caller that asks for the same key while it is in flight.
///
/// The first caller leads: it runs the operation itself, in its own task, so a miss costs no task of its own and no
/// thread hand-off on the way back. Callers that come while it runs wait for its result. A waiter that is cancelled
/// stops waiting (with `CancellationError`) without failing the others. A leader that is cancelled stops its
/// operation (its c-ares query or HTTP DNS request) and leaves; when others wait, the flight starts again for them
/// in a background task, which runs while one of them still waits. When the last caller of a flight stops waiting,
/// nobody wants its result any more: the flight is cancelled and forgotten, and the next caller for the key starts
/// a new one. So upstream work follows the askers: a client that asks and goes away (a reset HTTP/2 stream, a closed
/// connection) leaves nothing running, and each caller starts at most one run. Background flights
/// (``launchIfIdle(_:_:)``: refreshes nobody waits for) run to the end whoever joins and leaves them.
///
/// A leader returns when its operation does, so operations end at once when their task is cancelled. The package's
/// upstreams do: a c-ares query, an HTTP DNS request, a wait for an HTTP/2 connection being set up, and a system
/// lookup (its `getaddrinfo`, which cannot be interrupted, finishes unwatched).
///
/// A caller outside any task (a server's event loop sending its own misses) takes part too: it joins a flight with a
/// callback, or, when none runs, opens one that it runs itself and ends with ``finish(_:_:_:)`` (see
/// ``joinOrLead(_:_:)``); tasks join such a flight as any other, and the other way round.
final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Someone waiting for a flight's result: a task, or a callback (called on the thread that finishes the flight).
    private enum Waiter {
        case continuation(CheckedContinuation<Value, any Error>)
        case callback(@Sendable (Result<Value, any Error>) -> Void)

        func resume(with result: Result<Value, any Error>) {
            switch self {
            case .continuation(let continuation): continuation.resume(with: result)
            case .callback(let callback): callback(result)
            }
        }
    }

    private struct Flight {
        var id: Int
        var waiters: [Int: Waiter] = [:]
        /// Started without a caller: never cancelled for want of one.
        var background = false
        /// Run by a caller in its own task (the leader), who is not among `waiters`.
        var led = false
        /// The running operation, once started.
        var task: Task<Void, Never>?
        /// How to stop an operation run outside a task (``joinOrLead(_:_:)``), once started.
        var stop: (@Sendable () -> Void)?
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

    /// The number of callers waiting on flights, leaders included.
    var waiting: Int { state.withLock { $0.flights.values.reduce(0) { $0 + $1.waiters.count + ($1.led ? 1 : 0) } } }

    /// Joins the flight for `key`, or leads one with `operation` when none is running, and returns its result.
    /// - Throws: The operation's error, `CancellationError` when this caller is cancelled, or
    ///   `HTTPDNSError.Code.shutdown` when the owner is shutting down.
    func run(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        try Task.checkCancellation()
        let led = state.withLock { state -> Int? in
            guard state.flights[key] == nil else { return nil }
            let flight = state.takeID()
            state.flights[key] = Flight(id: flight, led: true)
            return flight
        }
        if let led { return try await lead(key, led, operation) }
        return try await join(key, operation)
    }

    /// Runs the flight `flight` in the caller's task and hands its result to those who joined it.
    private func lead(
        _ key: Key, _ flight: Int, _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let result: Result<Value, any Error>
        do {
            result = .success(try await operation())
        } catch {
            result = .failure(error)
        }
        guard case .failure = result, Task.isCancelled else {
            finish(key, flight, result)
            return try result.get()
        }
        // The leader was cancelled, and its operation with it: the others are not, so theirs starts again.
        let again = state.withLock { state -> Int? in
            guard var running = state.flights[key], running.id == flight else { return nil }
            guard !running.waiters.isEmpty else {
                state.flights[key] = nil
                return nil
            }
            running.id = state.takeID()
            running.led = false
            state.flights[key] = running
            return running.id
        }
        if let again { launch(key, again, operation) }
        throw CancellationError()
    }

    /// Waits for the flight for `key`, starting it in the background if it ended in the meantime.
    private func join(_ key: Key, _ operation: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let id = state.withLock { $0.takeID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let flight = state.withLock { state -> Int? in
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return nil
                    }
                    if state.flights[key] != nil {
                        state.flights[key]!.waiters[id] = .continuation(continuation)
                        return nil
                    }
                    let flight = state.takeID()
                    state.flights[key] = Flight(id: flight, waiters: [id: .continuation(continuation)])
                    return flight
                }
                if let flight { launch(key, flight, operation) }
            }
        } onCancel: {
            remove(key, waiter: id)?.resume(with: .failure(CancellationError()))
        }
    }

    /// Takes the waiter `id` out of the flight for `key` and returns it; when nobody waits any more, forgets the
    /// flight (a new caller starts afresh) and stops its work.
    private func remove(_ key: Key, waiter id: Int) -> Waiter? {
        let (waiter, abandoned) = state.withLock { state -> (Waiter?, Flight?) in
            guard var flight = state.flights[key], let waiter = flight.waiters.removeValue(forKey: id) else {
                return (nil, nil)
            }
            guard flight.waiters.isEmpty, !flight.background, !flight.led else {
                state.flights[key] = flight
                return (waiter, nil)
            }
            state.flights[key] = nil
            return (waiter, flight)
        }
        abandoned?.task?.cancel()
        abandoned?.stop?()
        return waiter
    }

    /// For a caller outside any task: joins the flight for `key` with `callback`, or, when none runs, opens one for
    /// the caller to run. `lead` is then the flight's number: the caller starts the operation, hands over how to
    /// stop it with ``started(_:_:stop:)`` and reports its result with ``finish(_:_:_:)`` (which calls `callback`
    /// too). `waiter` leaves with ``leave(_:waiter:)``.
    func joinOrLead(_ key: Key, _ callback: @escaping @Sendable (Result<Value, any Error>) -> Void)
        -> (waiter: Int, lead: Int?)
    {
        state.withLock { state in
            let id = state.takeID()
            if state.flights[key] != nil {
                state.flights[key]!.waiters[id] = .callback(callback)
                return (id, nil)
            }
            let flight = state.takeID()
            state.flights[key] = Flight(id: flight, waiters: [id: .callback(callback)])
            return (id, flight)
        }
    }

    /// How to stop the operation of `flight`, started by its caller outside a task; called at once when everyone
    /// left before it started.
    func started(_ key: Key, _ flight: Int, stop: @escaping @Sendable () -> Void) {
        let abandoned = state.withLock { state -> Bool in
            guard state.flights[key]?.id == flight else { return true }
            state.flights[key]!.stop = stop
            return false
        }
        if abandoned { stop() }
    }

    /// A caller outside a task stops waiting (its callback is not called); the flight stops when nobody waits.
    func leave(_ key: Key, waiter id: Int) {
        _ = remove(key, waiter: id)
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

    /// Ends `flight` with `result`: every waiter gets it (nobody, when the flight was abandoned).
    func finish(_ key: Key, _ flight: Int, _ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [Int: Waiter] in
            // An abandoned flight's entry is gone, or is a newer flight's: that one is not this result's.
            guard state.flights[key]?.id == flight else { return [:] }
            return state.flights.removeValue(forKey: key)?.waiters ?? [:]
        }
        for waiter in waiters.values { waiter.resume(with: result) }
    }
}
