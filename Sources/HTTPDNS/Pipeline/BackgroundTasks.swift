import Synchronization
import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The unstructured tasks a long-lived object starts (refreshes, probes, shared lookups), tracked so that
/// ``shutdown()`` can cancel them and wait until they have ended.
final class BackgroundTasks: Sendable {
    private struct State {
        var nextID = 0
        var tasks: [Int: Task<Void, Never>] = [:]
        var closed = false
    }

    private let state = Locked(State())
    /// The most tasks running at once for work that may be skipped (refreshes, probes); see ``spawn(optional:_:)``.
    let optionalLimit: Int

    /// Creates a registry; optional work beyond `optionalLimit` running tasks is refused.
    init(optionalLimit: Int = 1024) {
        self.optionalLimit = optionalLimit
    }

    /// Starts `operation` unless the registry is shut down, or, for `optional` work, already runs
    /// ``optionalLimit`` tasks; returns whether it started.
    @discardableResult
    func spawn(optional: Bool = false, _ operation: @escaping @Sendable () async -> Void) -> Bool {
        start(optional: optional, operation) != nil
    }

    /// Starts `operation` as ``spawn(optional:_:)`` does and returns its task (to cancel it), or `nil` when it was
    /// refused.
    func start(optional: Bool = false, _ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never>? {
        state.withLock { state in
            guard !state.closed, !optional || state.tasks.count < optionalLimit else { return nil }
            let id = state.nextID
            state.nextID += 1
            // Registered under the lock before the task can finish and deregister itself.
            let task = Task { [weak self] in
                await operation()
                self?.finished(id)
            }
            state.tasks[id] = task
            return task
        }
    }

    private func finished(_ id: Int) {
        _ = state.withLock { $0.tasks.removeValue(forKey: id) }
    }

    /// The number of tasks running.
    var count: Int { state.withLock { $0.tasks.count } }

    /// Waits until every task started so far, and any they start, has ended.
    func waitForAll() async {
        while true {
            let tasks = state.withLock { Array($0.tasks.values) }
            if tasks.isEmpty { return }
            for task in tasks { await task.value }
        }
    }

    /// Refuses new tasks, cancels the running ones and waits for them to end.
    func shutdown() async {
        let tasks = state.withLock { state in
            state.closed = true
            return Array(state.tasks.values)
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }
}
