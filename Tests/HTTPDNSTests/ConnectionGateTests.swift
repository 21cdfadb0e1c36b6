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
}
