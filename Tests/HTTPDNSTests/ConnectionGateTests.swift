import NIOCore
import NIOPosix
import HTTPDNS
import Testing
import TestSupport
import HTTPDNSPinnedClients

/// The admission queue in front of each pinned client, on a real event loop.
@Suite("Connection gate")
struct ConnectionGateTests {
    private let loop = MultiThreadedEventLoopGroup.singleton.next()

    @Test("waiters get in first come, first served as places are left")
    func firstComeFirstServed() async throws {
        let gate = ConnectionGate(limit: 1)
        try await gate.enter(deadline: .now() + .seconds(60), on: loop)
        let order = Locked<[Int]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<5 {
                // Each waiter is queued before the next one starts.
                group.addTask {
                    try await gate.enter(deadline: .now() + .seconds(60), on: loop)
                    order.withLock { $0.append(index) }
                    gate.leave()
                }
                #expect(try await waitUntil { gate.waiting == index + 1 })
            }
            gate.leave()
            try await group.waitForAll()
        }
        #expect(order.withLock { $0 } == [0, 1, 2, 3, 4])
        #expect(gate.admitted == 0)
        #expect(gate.waiting == 0)
    }

    @Test("a raised limit (the client speaks HTTP/2) lets the waiters in at once")
    func raisedLimit() async throws {
        let gate = ConnectionGate(limit: 1)
        try await gate.enter(deadline: .now() + .seconds(60), on: loop)
        let entered = Locked(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await gate.enter(deadline: .now() + .seconds(60), on: loop)
                    entered.withLock { $0 += 1 }
                }
            }
            #expect(try await waitUntil { gate.waiting == 3 })
            gate.raiseLimit(to: 4)
            try await group.waitForAll()
        }
        #expect(entered.withLock { $0 } == 3)
        #expect(gate.admitted == 4)
    }

    @Test("a waiter whose deadline passes or whose task is cancelled leaves, and keeps no place")
    func deadlineAndCancellation() async throws {
        let gate = ConnectionGate(limit: 1)
        try await gate.enter(deadline: .now() + .seconds(60), on: loop)
        await #expect(throws: ConnectionGate.Refusal.deadlineExceeded) {
            try await gate.enter(deadline: .now() + .milliseconds(50), on: loop)
        }
        let cancelled = Task { try await gate.enter(deadline: .now() + .seconds(60), on: loop) }
        #expect(try await waitUntil { gate.waiting == 1 })
        cancelled.cancel()
        await #expect(throws: ConnectionGate.Refusal.cancelled) { try await cancelled.value }
        // Cancelled before it could queue: it never waits.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await gate.enter(deadline: .now() + .seconds(60), on: loop)
        }
        await #expect(throws: ConnectionGate.Refusal.cancelled) { try await early.value }
        #expect(gate.waiting == 0)
        gate.leave()
        #expect(gate.admitted == 0)
        try await gate.enter(deadline: .now() + .seconds(1), on: loop)
        #expect(gate.admitted == 1)
    }

    @Test("deadlines out of arrival order each end their own waiter; one that gets in first leaves the rest timed")
    func deadlinesOutOfOrder() async throws {
        let gate = ConnectionGate(limit: 1)
        try await gate.enter(deadline: .now() + .seconds(60), on: loop)
        let outcomes = Locked<[String: String]>([:])
        let started = ContinuousClock.now
        let elapsed = Locked<[String: Duration]>([:])
        try await withThrowingTaskGroup(of: Void.self) { group in
            // "late" is queued first with a long deadline; "early", queued after it, has the only short one and must
            // end at its own deadline while the others wait (the gate's one timer is armed again, earlier, for it);
            // "admitted" and "patient" get the places the test leaves. Only "early" may time out, so a loaded
            // machine cannot change the outcome.
            let waiters = [("late", 60_000), ("early", 150), ("admitted", 60_000), ("patient", 60_000)]
            for (index, (name, milliseconds)) in waiters.enumerated() {
                let deadline = NIODeadline.now() + .milliseconds(Int64(Double(milliseconds) * TestTiming.scale))
                group.addTask {
                    do {
                        try await gate.enter(deadline: deadline, on: loop)
                        outcomes.withLock { $0[name] = "in" }
                        if name == "admitted" { gate.leave() }
                    } catch {
                        outcomes.withLock { $0[name] = "\(error)" }
                    }
                    elapsed.withLock { $0[name] = ContinuousClock.now - started }
                }
                // Queued (or already timed out) before the next one starts: arrival order is the list's.
                #expect(try await waitUntil { gate.waiting + outcomes.withLock({ $0.count }) >= index + 1 })
            }
            #expect(try await waitUntil { outcomes.withLock { $0["early"] } != nil })
            #expect(outcomes.withLock { $0["late"] } == nil, "the late waiter must still be waiting")
            // The place goes to the longest waiter still queued: "late" (queued first).
            gate.leave()
            #expect(try await waitUntil { outcomes.withLock { $0["late"] } == "in" })
            gate.leave()
            #expect(try await waitUntil { outcomes.withLock { $0["admitted"] } == "in" })
            #expect(try await waitUntil { outcomes.withLock { $0["patient"] } == "in" })
            gate.leave()
            try await group.waitForAll()
        }
        #expect(outcomes.withLock { $0["early"] } == "deadlineExceeded")
        let early = elapsed.withLock { $0["early"] } ?? .zero
        // At its own deadline, not at the others' (60 s): the timer armed for "late" was replaced by an earlier one.
        #expect(early >= .milliseconds(150) && early < .seconds(30), "early ended at \(early)")
        #expect(gate.admitted == 0)
        #expect(gate.waiting == 0)
    }

    @Test("a queue past every deadline empties; the gate takes new waiters and times them again")
    func expiredQueueThenNewWaiters() async throws {
        let gate = ConnectionGate(limit: 1)
        try await gate.enter(deadline: .now() + .seconds(60), on: loop)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    await #expect(throws: ConnectionGate.Refusal.deadlineExceeded) {
                        try await gate.enter(deadline: .now() + .milliseconds(80), on: loop)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(gate.waiting == 0)
        await #expect(throws: ConnectionGate.Refusal.deadlineExceeded) {
            try await gate.enter(deadline: .now() + .milliseconds(50), on: loop)
        }
        gate.leave()
        #expect(gate.admitted == 0)
    }
}
