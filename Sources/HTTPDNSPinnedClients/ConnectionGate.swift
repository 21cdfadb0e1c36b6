package import NIOCore
import HTTPDNSCore

/// Admits requests to one pinned client no faster than its connections can take them, and queues the rest in
/// arrival order until their own deadline.
///
/// AsyncHTTPClient also queues a request that finds every connection busy, but it bounds that wait by its connect
/// timeout (a few seconds): a burst to a slow host beyond the connection limit would fail with a timeout where a
/// plain URLSession keeps the requests queued. The gate keeps the client's queue empty instead: a request enters
/// only when a connection (HTTP/1.1) or a stream (HTTP/2) is free, and waits here for as long as its
/// `timeoutInterval` allows. A cancelled waiter leaves the queue at once.
package final class ConnectionGate: Sendable {
    /// Why a request did not get through the gate.
    package enum Refusal: Error {
        /// The request's deadline passed while it waited.
        case deadlineExceeded
        /// The waiting task was cancelled.
        case cancelled
    }

    /// Requests admitted at once when the client is known to speak HTTP/2: streams, not connections, are the
    /// limit then, and servers commonly allow 100 or more (a lower server limit queues in AsyncHTTPClient, briefly).
    package static let http2Limit = 100

    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>
        var timer: Scheduled<Void>?
    }

    private struct State {
        var limit: Int
        var admitted = 0
        var waiters = CircularBuffer<Waiter>()
        /// Waiters given an id but not queued yet, and whether they were cancelled meanwhile (the cancellation
        /// handler can run before the continuation exists).
        var arriving: [UInt64: Bool] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Locked<State>

    /// A gate that admits `limit` requests at once.
    package init(limit: Int) {
        state = Locked(State(limit: max(1, limit)))
    }

    /// Requests admitted and not yet left (for tests).
    package var admitted: Int { state.withLock { $0.admitted } }

    /// Requests waiting (for tests).
    package var waiting: Int { state.withLock { $0.waiters.count } }

    /// Enters the gate, waiting in arrival order until a place is free, `deadline` passes or the task is cancelled.
    /// Every successful `enter` must be paired with one ``leave()``.
    package func enter(deadline: NIODeadline, on eventLoop: any EventLoop) async throws(Refusal) {
        let id: UInt64? = state.withLock { state in
            if state.admitted < state.limit, state.waiters.isEmpty {
                state.admitted += 1
                return nil
            }
            state.nextID &+= 1
            state.arriving[state.nextID] = false
            return state.nextID
        }
        guard let id else { return }
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    queue(id, continuation, deadline: deadline, on: eventLoop)
                }
            } onCancel: {
                dismiss(id, with: .cancelled)
            }
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw .cancelled
        }
    }

    /// Leaves the gate, handing the place to the longest waiter.
    package func leave() {
        let next = state.withLock { state -> Waiter? in
            guard let next = state.waiters.popFirst() else {
                state.admitted -= 1
                return nil
            }
            // The place passes straight to the waiter: `admitted` stays.
            return next
        }
        next?.timer?.cancel()
        next?.continuation.resume()
    }

    /// Admits up to `limit` at once from now on (when the client turned out to speak HTTP/2), letting waiters in.
    package func raiseLimit(to limit: Int) {
        let admitted = state.withLock { state -> [Waiter] in
            guard limit > state.limit else { return [] }
            state.limit = limit
            var admitted: [Waiter] = []
            while state.admitted < state.limit, let next = state.waiters.popFirst() {
                state.admitted += 1
                admitted.append(next)
            }
            return admitted
        }
        for waiter in admitted {
            waiter.timer?.cancel()
            waiter.continuation.resume()
        }
    }

    private func queue(
        _ id: UInt64, _ continuation: CheckedContinuation<Void, any Error>, deadline: NIODeadline,
        on eventLoop: any EventLoop
    ) {
        enum Outcome { case queued, admitted, cancelled }
        let outcome = state.withLock { state -> Outcome in
            if state.arriving.removeValue(forKey: id) == true { return .cancelled }
            // A place may have come free between the first look and now.
            if state.admitted < state.limit, state.waiters.isEmpty {
                state.admitted += 1
                return .admitted
            }
            state.waiters.append(Waiter(id: id, continuation: continuation, timer: nil))
            return .queued
        }
        switch outcome {
        case .admitted:
            continuation.resume()
        case .cancelled:
            continuation.resume(throwing: Refusal.cancelled)
        case .queued:
            let timer = eventLoop.scheduleTask(deadline: deadline) { [self] in dismiss(id, with: .deadlineExceeded) }
            let stillWaiting = state.withLock { state -> Bool in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return false }
                state.waiters[index].timer = timer
                return true
            }
            if !stillWaiting { timer.cancel() }
        }
    }

    /// Takes waiter `id` out of the queue and fails it; a waiter not queued yet is failed when it arrives, one already
    /// admitted is left alone.
    private func dismiss(_ id: UInt64, with refusal: Refusal) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                if state.arriving[id] != nil { state.arriving[id] = true }
                return nil
            }
            return state.waiters.remove(at: index)
        }
        guard let waiter else { return }
        waiter.timer?.cancel()
        waiter.continuation.resume(throwing: refusal)
    }
}
