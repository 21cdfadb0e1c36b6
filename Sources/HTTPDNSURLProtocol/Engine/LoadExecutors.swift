import NIOCore
import Synchronization

/// A task executor over one NIO event loop: a task that prefers it runs between its awaits on the loop's thread.
///
/// The URL protocol runs each load on one (``LoadExecutors``): the session's queue hops to the loop, where the load
/// resolves, builds the request and hands it to AsyncHTTPClient, and the answer hops back to the session's queue.
/// AsyncHTTPClient prefers a connection on the current loop but takes an available one on another loop rather than
/// wait (`leaseStream(onPreferred:)`), so a cache hit costs two hops when the connection is on the load's loop (an
/// idle HTTP/1.1 connection there) and four when it is not: the request to the connection's loop and its answer
/// back, which is the common case for an HTTP/2 host, whose one connection lives on one loop. Nothing hops to the
/// cooperative pool in between.
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
