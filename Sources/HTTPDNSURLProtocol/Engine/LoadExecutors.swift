import NIOCore
import Synchronization

/// A task executor over one NIO event loop: a task that prefers it runs between its awaits on the loop's thread.
///
/// The URL protocol runs each load on one (``LoadExecutors``), so that a cache hit costs two hops: the session's
/// queue to the loop (where the load resolves, builds the request and hands it to AsyncHTTPClient, which prefers a
/// connection on the current loop), and the loop back to the session's queue with the answer. The answer completes
/// the exchange on the loop and resumes the load there, with no hop to the cooperative pool in between.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// Runs `job` on the loop, after what the loop already has queued.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}

/// One ``EventLoopTaskExecutor`` per loop of the pinned clients' group, handed out in turn, so loads spread over the
/// loops as connections do.
final class LoadExecutors: Sendable {
    private let executors: [EventLoopTaskExecutor]
    private let next = Atomic<UInt>(0)

    init(_ group: any EventLoopGroup) {
        executors = group.makeIterator().map(EventLoopTaskExecutor.init)
    }

    /// The executor for the next load; `nil` for a group without loops to list.
    func take() -> EventLoopTaskExecutor? {
        guard !executors.isEmpty else { return nil }
        let turn = next.wrappingAdd(1, ordering: .relaxed).oldValue
        return executors[Int(turn % UInt(executors.count))]
    }
}
