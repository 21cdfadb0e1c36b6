import NIOCore
import NIOEmbedded
import Testing

@testable import HTTPDNSServer

/// The flush of answers that came back from upstreams: once per batch of the event loop's tasks, however many of the
/// batch's tasks wrote an answer.
@Suite("HTTP DNS server: answers from upstreams flushed once per batch of loop tasks")
struct LateAnswerFlushTests {
    /// Counts the flushes it is asked for.
    final class Recorder: ChannelInboundHandler, LateAnswerFlushing {
        typealias InboundIn = ByteBuffer
        var lateFlushQueued = false
        var flushes = 0

        func flushLateAnswers(context: ChannelHandlerContext) { flushes += 1 }
    }

    @Test("three answers in one batch of tasks: one flush, after the batch; the next batch gets its own")
    func oneFlushPerBatch() throws {
        let recorder = Recorder()
        let channel = EmbeddedChannel(handler: recorder)
        defer { _ = try? channel.finish() }
        let context = try channel.pipeline.syncOperations.context(handlerType: Recorder.self)
        let loop = channel.embeddedEventLoop
        // Three answers arrive as three tasks of one batch.
        for _ in 0..<3 { loop.execute { recorder.flushAfterLoopTasks(context: context) } }
        #expect(recorder.flushes == 0, "nothing runs before the loop's turn")
        loop.run()
        #expect(recorder.flushes == 1, "one flush for the batch")
        #expect(!recorder.lateFlushQueued)
        loop.execute { recorder.flushAfterLoopTasks(context: context) }
        loop.run()
        #expect(recorder.flushes == 2, "a later answer is flushed too")
        loop.run()
        #expect(recorder.flushes == 2, "and only once")
    }
}
