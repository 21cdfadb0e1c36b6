import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import HTTPDNSCore

/// Runs `operation`, throwing `error` if it takes longer than `limit` (the operation is cancelled then). Shared by
/// the package's HTTP clients, whose peers can stall mid-body, and by the URL protocol's resolution step.
///
/// The timer is a NIO scheduled task, cancelled (and freed) as soon as the operation ends. A `Task.sleep` racing
/// the operation would not do: on Linux a cancelled sleep keeps its timer, and the memory it holds, until its
/// deadline, so at thousands of requests a second with a 60 s limit hundreds of thousands of dead timers pile up
/// (the soak test saw resident memory grow by 430 MB over a million requests).
package func withTimeLimit<T: Sendable>(
    _ limit: Duration,
    orThrow timeoutError: @autoclosure @escaping @Sendable () -> any Error,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await operation() }
    let expiry = TimeLimitExpiry()
    let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(limit)) {
        expiry.expired.store(true, ordering: .releasing)
        work.cancel()
    }
    defer { timer.cancel() }
    do {
        return try await withTaskCancellationHandler {
            try await work.value
        } onCancel: {
            work.cancel()
        }
    } catch {
        if expiry.expired.load(ordering: .acquiring) { throw timeoutError() }
        throw error
    }
}

/// Whether a ``withTimeLimit(_:orThrow:_:)`` timer fired, shared between the timer and the waiting task.
private final class TimeLimitExpiry: Sendable {
    let expired = Atomic<Bool>(false)
}
