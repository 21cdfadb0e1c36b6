import Testing
import TestSupport

@testable import HTTPDNSCore

/// The wait the system resolver and the DoH client's connection set-up use for work that cannot be interrupted.
@Suite("Cancellable waits")
struct CancellableWaitTests {
    @Test(
        "a cancelled waiter leaves at once; the work's late result is dropped; a waiter cancelled before it starts never starts the work"
    )
    func cancellation() async throws {
        let held = Locked<CancellableWait<Int>?>(nil)
        let waiter = Task { try await CancellableWait<Int>.value { wait in held.withLock { $0 = wait } } }
        #expect(try await waitUntil { held.withLock { $0 != nil } })
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        // The work ends later: nobody waits any more, and nothing is resumed twice.
        held.withLock { $0 }?.finish(.success(1))

        let started = Locked(false)
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await CancellableWait<Int>.value { _ in started.withLock { $0 = true } }
        }
        await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
        #expect(!started.withLock { $0 })

        // Without cancellation the result is the work's, errors included.
        #expect(try await CancellableWait<Int>.value { $0.finish(.success(7)) } == 7)
        await #expect(throws: CancellationError.self) {
            try await CancellableWait<Int>.value { $0.finish(.failure(CancellationError())) }
        }
    }
}
