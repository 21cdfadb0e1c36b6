import NIOCore

/// A handler whose answers from upstreams are flushed once per batch of its event loop's tasks, not once each.
///
/// Answers that waited for an upstream come back to the event loop as tasks, and under load several arrive in the
/// same batch (the loop runs every task queued since its last turn before it polls again). Flushing each one on its
/// own cost a system call per answer (`sendmsg` for a datagram, a TLS record and a `write` for a stream); flushed
/// after the batch, they leave together (`sendmmsg`, one `writev`, answers sharing TLS records). The flush runs as a
/// task queued behind the batch, so an answer waits only for the tasks already queued with it. Answers found during
/// a read burst are flushed at its end, as before.
///
/// Every member is used on the channel's event loop only.
protocol LateAnswerFlushing: AnyObject {
    /// A flush is queued behind the event loop's current batch of tasks.
    var lateFlushQueued: Bool { get set }
    /// Sends what was written; called by the queued flush.
    func flushLateAnswers(context: ChannelHandlerContext)
}

extension LateAnswerFlushing {
    /// Queues one flush behind the tasks the event loop is running, unless one is queued already.
    func flushAfterLoopTasks(context: ChannelHandlerContext) {
        guard !lateFlushQueued else { return }
        lateFlushQueued = true
        let bound = NIOLoopBound((self as any LateAnswerFlushing, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.lateFlushQueued = false
            handler.flushLateAnswers(context: context)
        }
    }
}
