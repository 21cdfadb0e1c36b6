package import NIOCore

/// A task executor that runs jobs on one NIO event loop.
///
/// A task that prefers it runs between its awaits on the loop that also carries its I/O: a lookup whose answer
/// arrives on that loop resumes there at once, queued behind the loop's current work, rather than waking a thread of
/// the cooperative pool. The loop is not blocked by it any more than by its own callbacks, so the work a task does
/// there between awaits should stay as small.
package final class EventLoopTaskExecutor: TaskExecutor {
    /// The loop the jobs run on.
    package let eventLoop: any EventLoop

    /// An executor for `eventLoop`.
    package init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
