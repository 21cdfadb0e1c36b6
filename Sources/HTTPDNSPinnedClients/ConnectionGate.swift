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
///
/// Deadlines are kept by one timer per gate, armed for the earliest deadline of those waiting and left running when
/// that waiter gets in: when it fires, it fails every waiter whose deadline has passed and is armed again for the
/// earliest left. Requests with the same timeout queue in deadline order, so the timer is scheduled about once per
/// timeout rather than once per waiter (a timer per waiter, scheduled from the waiter's thread and cancelled from
/// the leaver's, woke the event loop twice per queued request).
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
        var deadline: NIODeadline
    }

    private struct State {
        var limit: Int
        var admitted = 0
        var waiters = CircularBuffer<Waiter>()
        /// Waiters given an id but not queued yet, and whether they were cancelled meanwhile (the cancellation
        /// handler can run before the continuation exists).
        var arriving: [UInt64: Bool] = [:]
        var nextID: UInt64 = 0
        /// The deadline timer and when it fires; `generation` tells a timer being armed from one that was replaced.
        var sweep: (task: Scheduled<Void>?, firesAt: NIODeadline, generation: UInt64)?
        var sweepGeneration: UInt64 = 0
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
            waiter.continuation.resume()
        }
    }

    private func queue(
        _ id: UInt64, _ continuation: CheckedContinuation<Void, any Error>, deadline: NIODeadline,
        on eventLoop: any EventLoop
    ) {
        enum Outcome { case queued(arm: Claim?), admitted, cancelled }
        let outcome = state.withLock { state -> Outcome in
            if state.arriving.removeValue(forKey: id) == true { return .cancelled }
            // A place may have come free between the first look and now.
            if state.admitted < state.limit, state.waiters.isEmpty {
                state.admitted += 1
                return .admitted
            }
            state.waiters.append(Waiter(id: id, continuation: continuation, deadline: deadline))
            return .queued(arm: Self.claimSweep(&state, for: deadline))
        }
        switch outcome {
        case .admitted:
            continuation.resume()
        case .cancelled:
            continuation.resume(throwing: Refusal.cancelled)
        case .queued(let claim):
            if let claim { arm(claim, at: deadline, on: eventLoop) }
        }
    }

    /// The timer claimed for an earlier deadline: its generation, and the timer it replaces.
    private struct Claim {
        var generation: UInt64
        var replaced: Scheduled<Void>?
    }

    /// Whether a waiter with `deadline` needs the timer armed earlier: then the timer is claimed for it and the
    /// claim returned, for ``arm(_:at:on:)`` to carry out outside the lock.
    private static func claimSweep(_ state: inout State, for deadline: NIODeadline) -> Claim? {
        if let sweep = state.sweep, sweep.firesAt <= deadline { return nil }
        state.sweepGeneration &+= 1
        let replaced = state.sweep?.task
        state.sweep = (nil, deadline, state.sweepGeneration)
        return Claim(generation: state.sweepGeneration, replaced: replaced)
    }

    /// Cancels the timer `claim` replaces and schedules its own, unless a later claim replaced it meanwhile.
    private func arm(_ claim: Claim, at deadline: NIODeadline, on eventLoop: any EventLoop) {
        claim.replaced?.cancel()
        let generation = claim.generation
        let task = eventLoop.scheduleTask(deadline: deadline) { [self] in sweep(generation, on: eventLoop) }
        let current = state.withLock { state -> Bool in
            guard state.sweep?.generation == generation else { return false }
            state.sweep?.task = task
            return true
        }
        if !current { task.cancel() }
    }

    /// The timer fired: fails every waiter whose deadline passed and arms the timer for the earliest one left.
    private func sweep(_ generation: UInt64, on eventLoop: any EventLoop) {
        let now = NIODeadline.now()
        let (expired, next) = state.withLock { state -> ([Waiter], (Claim, NIODeadline)?) in
            guard state.sweep?.generation == generation else { return ([], nil) }
            state.sweep = nil
            var expired: [Waiter] = []
            var kept = CircularBuffer<Waiter>(initialCapacity: state.waiters.count)
            var earliest: NIODeadline?
            for waiter in state.waiters {
                if waiter.deadline <= now {
                    expired.append(waiter)
                } else {
                    kept.append(waiter)
                    earliest = min(earliest ?? waiter.deadline, waiter.deadline)
                }
            }
            state.waiters = kept
            guard let earliest else { return (expired, nil) }
            return (expired, Self.claimSweep(&state, for: earliest).map { ($0, earliest) })
        }
        for waiter in expired { waiter.continuation.resume(throwing: Refusal.deadlineExceeded) }
        if let (claim, deadline) = next { arm(claim, at: deadline, on: eventLoop) }
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
        // The timer stays: it finds nothing to fail for this waiter, or other waiters to fail.
        waiter?.continuation.resume(throwing: refusal)
    }
}
