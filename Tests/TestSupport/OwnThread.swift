import Foundation

/// Runs `body` on a thread of its own: the task keeps its task-locals (so `#expect` inside still belongs to the
/// test), but its work no longer occupies a thread of the cooperative pool.
///
/// Swift Testing runs tests in parallel on the cooperative pool, which has one thread per core. A test that computes
/// for many seconds (a fuzzer, a million-line parse in a debug build) would hold one of the two threads of a
/// two-core machine that long, and every test waiting on I/O would then wait for it too: a timing-sensitive test
/// elsewhere would fail for no reason of its own. The kernel shares the cores fairly between threads instead.
///
/// The thread ends when `body` returns, so `body` must not leave unstructured tasks behind (they would inherit the
/// executor preference and never run).
public func onOwnThread<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
    let executor = OwnThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor, operation: body)
}

/// A task executor with one thread, which runs jobs in order until ``stop()``.
///
/// `@unchecked Sendable`: `jobs` and `stopped` are only read or written with `condition` locked.
final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "test-own-thread"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once the jobs queued so far have run.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
