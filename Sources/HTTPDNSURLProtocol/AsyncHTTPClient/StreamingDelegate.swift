import AsyncHTTPClient
import HTTPDNS
import NIOCore
import NIOHTTP1
import Synchronization

/// Streams a response from AsyncHTTPClient's delegate API straight into the caller's body sequence: each part is
/// handed over on the event loop, with back-pressure (the connection stops reading while 8 parts wait), and the
/// request's deadline covers the whole exchange, body included, because the delegate API keeps its deadline until
/// the end. No task of its own, unlike ``BodyPump``, which the async API needs for bodies it cannot send here.
///
/// `@unchecked Sendable`: AsyncHTTPClient calls the response-delegate methods on the request's event loop one at a
/// time, so `headDelivered` is only touched there; `requestSent` is an atomic (the caller reads it after a failure);
/// the response head is handed over behind a lock (``receivedHead``); what the consumer's side shares (demand,
/// termination, the task) is in ``Demand``, behind its lock.
final class StreamingDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Void
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Demand
    >

    /// The consumer's side: asks for more, or goes away (then the request is cancelled).
    final class Demand: NIOAsyncSequenceProducerDelegate {
        private struct State {
            var waiting: EventLoopPromise<Void>?
            var pending = false
            var terminated = false
            var task: HTTPClient.Task<Void>?
        }

        private let state = Locked(State())

        func attach(_ task: HTTPClient.Task<Void>) {
            let terminated = state.withLock { state in
                state.task = task
                return state.terminated
            }
            if terminated { task.cancel() }
        }

        /// A future that completes when the consumer wants more (failed when it went away).
        func next(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
            state.withLock { state in
                if state.terminated { return eventLoop.makeFailedFuture(CancellationError()) }
                if state.pending {
                    state.pending = false
                    return eventLoop.makeSucceededVoidFuture()
                }
                let promise = eventLoop.makePromise(of: Void.self)
                state.waiting = promise
                return promise.futureResult
            }
        }

        func produceMore() {
            let waiting = state.withLock { state in
                defer { state.waiting = nil }
                if state.waiting == nil { state.pending = true }
                return state.waiting
            }
            waiting?.succeed()
        }

        func didTerminate() {
            let (waiting, task) = state.withLock { state in
                state.terminated = true
                defer { state.waiting = nil }
                return (state.waiting, state.task)
            }
            waiting?.fail(CancellationError())
            task?.cancel()
        }
    }

    /// Completes when the response head arrived (``receivedHead`` then holds it) or the exchange failed first.
    let head: EventLoopPromise<Void>
    let demand: Demand
    private let received = Locked<HTTPResponseHead?>(nil)
    private let source: Producer.Source
    private let sent = Atomic<Bool>(false)
    private let watch: BodyWatch
    private let url: String
    private var headDelivered = false

    /// A delegate feeding `source`, whose sequence the caller hands out (the delegate never holds it, so a body
    /// the caller drops ends the exchange instead of waiting for the deadline).
    init(eventLoop: any EventLoop, source: Producer.Source, demand: Demand, watch: BodyWatch, url: String) {
        head = eventLoop.makePromise(of: Void.self)
        self.source = source
        self.demand = demand
        self.watch = watch
        self.url = url
    }

    /// A body sequence with back-pressure (8 parts at most wait) and the ``Demand`` that stands for its reader.
    static func makeBody() -> (body: Producer, source: Producer.Source, demand: Demand) {
        let demand = Demand()
        let produced = Producer.makeSequence(
            elementType: ByteBuffer.self,
            backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
            finishOnDeinit: false,
            delegate: demand)
        return (produced.sequence, produced.source, demand)
    }

    /// The response head, once ``head`` has succeeded. It crosses threads through a lock rather than inside the
    /// promise: an awaiting task resumed before it suspended is synchronised by the concurrency runtime's own atomics,
    /// which ThreadSanitizer cannot see, and it reported the head's storage as raced (swiftlang/swift#57803).
    var receivedHead: HTTPResponseHead? { received.withLock { $0 } }

    /// Whether any of the request was written.
    var requestSent: Bool { sent.load(ordering: .acquiring) }

    func didSendRequestHead(task: HTTPClient.Task<Void>, _ head: HTTPRequestHead) {
        sent.store(true, ordering: .releasing)
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        headDelivered = true
        received.withLock { $0 = head }
        self.head.succeed(())
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        watch.add(buffer.readableBytes)
        switch source.yield(buffer) {
        case .produceMore: return task.eventLoop.makeSucceededVoidFuture()
        case .stopProducing: return demand.next(on: task.eventLoop)
        case .dropped: return task.eventLoop.makeFailedFuture(CancellationError())
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        if !headDelivered {
            headDelivered = true
            head.fail(error)
        }
        // The reader sees the typed error (a deadline becomes timedOut), as from the rest of the front.
        let visible = PinnedTransport.interceptionError(error, url: url)
        watch.end(visible)
        source.finish(visible)
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        watch.end(nil)
        source.finish()
    }
}

/// What happened to a streamed body: its bytes so far, and once, how it ended. The front attaches what to do at
/// the end (report the trace) when it knows the response is the final one; an end that came first is reported then.
final class BodyWatch: Sendable {
    private struct State {
        var bytes = 0
        var ended: (any Error)?? = nil
        var onEnd: (@Sendable (Int, (any Error)?) -> Void)?
    }

    private let state = Locked(State())

    func add(_ count: Int) { state.withLock { $0.bytes += count } }

    /// Records the end (`nil`: the whole body arrived) and runs the handler, once.
    func end(_ error: (any Error)?) {
        let (handler, bytes) = state.withLock { state -> ((@Sendable (Int, (any Error)?) -> Void)?, Int) in
            guard state.ended == nil else { return (nil, 0) }
            state.ended = .some(error)
            defer { state.onEnd = nil }
            return (state.onEnd, state.bytes)
        }
        handler?(bytes, error)
    }

    /// Runs `handler` with the bytes read and the error at the end (at once if the body already ended).
    func onEnd(_ handler: @escaping @Sendable (Int, (any Error)?) -> Void) {
        let ended = state.withLock { state -> (Int, (any Error)?)? in
            guard let ended = state.ended else {
                state.onEnd = handler
                return nil
            }
            return (state.bytes, ended)
        }
        if let (bytes, error) = ended { handler(bytes, error) }
    }
}
