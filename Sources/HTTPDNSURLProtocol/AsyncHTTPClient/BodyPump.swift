import AsyncHTTPClient
import HTTPDNS
import NIOCore

/// Reads an AsyncHTTPClient response body on a task of its own and hands it on as a body with back-pressure, so
/// that the request's deadline covers the whole body.
///
/// AsyncHTTPClient's async `execute` stops its deadline timer once the response head arrived, and the pinned
/// clients have no read timeout, so a server that stalls mid-body would hold the caller for ever. The pump owns the
/// read: at the deadline it cancels its task (AsyncHTTPClient then closes the connection) and the caller's next
/// read fails with ``InterceptionError/Code/timedOut``. A caller that stops reading or drops the body cancels it
/// too. At most a few parts wait between the two sides (a high watermark of 8), so a slow reader holds the server
/// back instead of buffering the body.
final class BodyPump: NIOAsyncSequenceProducerDelegate {
    private typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, BodyPump
    >

    private struct State {
        var task: Task<Void, Never>?
        var stopped = false
        var expired = false
        var demand: CheckedContinuation<Bool, Never>?
        var pendingDemand = false
    }

    private let state = Locked(State())

    private init() {}

    /// Starts reading `body` and returns the body the caller reads.
    /// - Parameters:
    ///   - deadline: When the read fails with `timedOut`.
    ///   - onPart: Called with each part's size as it is read.
    ///   - onEnd: Called once when the read ends: `nil` at the end of the body, else the error the caller sees.
    static func start(
        _ body: HTTPClientResponse.Body, deadline: NIODeadline, url: String, on eventLoop: any EventLoop,
        onPart: @escaping @Sendable (Int) -> Void, onEnd: @escaping @Sendable ((any Error)?) -> Void
    ) -> HTTPClientResponse.Body {
        let pump = BodyPump()
        let produced = Producer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
            finishOnDeinit: false,
            delegate: pump)
        let source = produced.source
        let timer = eventLoop.scheduleTask(deadline: deadline) { pump.stop(expired: true) }
        let task = Task {
            var failure: (any Error)?
            do {
                reading: for try await part in body {
                    onPart(part.readableBytes)
                    switch source.yield(part) {
                    case .produceMore: continue
                    case .stopProducing: guard await pump.waitForDemand() else { break reading }
                    case .dropped: break reading
                    }
                }
            } catch {
                failure = error
            }
            timer.cancel()
            if let error = failure {
                // The reader sees the typed error, as from the rest of the front.
                failure =
                    pump.hasExpired
                    ? InterceptionError(
                        code: .timedOut, message: "the body did not arrive within the request's time limit", url: url)
                    : PinnedTransport.interceptionError(error, url: url)
            }
            // The lease ends and the trace is out before the reader sees the end.
            onEnd(failure)
            if let failure { source.finish(failure) } else { source.finish() }
        }
        pump.attach(task)
        return .stream(produced.sequence)
    }

    private var hasExpired: Bool { state.withLock { $0.expired } }

    private func attach(_ task: Task<Void, Never>) {
        let stopped = state.withLock { state in
            state.task = task
            return state.stopped
        }
        if stopped { task.cancel() }
    }

    /// Stops the read: the deadline passed (`expired`) or the caller went away.
    private func stop(expired: Bool) {
        let (task, demand) = state.withLock { state in
            state.stopped = true
            state.expired = state.expired || expired
            defer { state.demand = nil }
            return (state.task, state.demand)
        }
        demand?.resume(returning: false)
        task?.cancel()
    }

    /// Waits until the caller wants more; `false` when it went away.
    private func waitForDemand() async -> Bool {
        await withCheckedContinuation { continuation in
            let answer: Bool? = state.withLock { state in
                if state.stopped { return false }
                if state.pendingDemand {
                    state.pendingDemand = false
                    return true
                }
                state.demand = continuation
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    func produceMore() {
        let demand = state.withLock { state in
            defer { state.demand = nil }
            if state.demand == nil { state.pendingDemand = true }
            return state.demand
        }
        demand?.resume(returning: true)
    }

    func didTerminate() {
        stop(expired: false)
    }
}
