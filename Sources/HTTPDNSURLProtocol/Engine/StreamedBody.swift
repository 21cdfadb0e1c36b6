import AsyncHTTPClient
import HTTPDNS
import NIOCore
import Synchronization
import HTTPDNSPinnedClients
import HTTPDNSCore

/// A streamed response body as the fronts hand it out: AsyncHTTPClient's body, read in the caller's own task, with
/// its bytes counted and its end (read to the end, failed, or dropped) reported once through ``BodyEnd``.
///
/// The deadline is held by the connection (``ExchangeDeadline``): a stalled body fails there, and the reader sees
/// `HTTPDNSError.Code.timeout`. Dropping the body (or its iterator) unread cancels the exchange, as
/// AsyncHTTPClient does, and ends it as cancelled.
struct StreamedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    private let body: HTTPClientResponse.Body
    private let end: BodyEnd
    private let deadline: NIODeadline
    private let url: String

    init(_ body: HTTPClientResponse.Body, end: BodyEnd, deadline: NIODeadline, url: String) {
        self.body = body
        self.end = end
        self.deadline = deadline
        self.url = url
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(parts: body.makeAsyncIterator(), end: end, deadline: deadline, url: url)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var parts: HTTPClientResponse.Body.AsyncIterator
        let end: BodyEnd
        let deadline: NIODeadline
        let url: String

        mutating func next() async throws -> ByteBuffer? {
            do {
                guard let part = try await parts.next() else {
                    // The lease ends and the trace is out before the reader sees the end.
                    end.finish(nil)
                    return nil
                }
                end.watch.add(part.readableBytes)
                return part
            } catch {
                let visible =
                    error is ExchangeDeadline.Exceeded
                        || (!(error is CancellationError) && NIODeadline.now() >= deadline)
                    ? HTTPDNSError(
                        code: .timeout, message: "the body did not arrive within the request's time limit", url: url)
                    : PinnedTransport.interceptionError(error, url: url)
                end.finish(visible)
                throw visible
            }
        }
    }
}

/// The end of a streamed exchange, once: the connection place and client go back (``StreamLease``) and the trace
/// hears how the body ended. A body dropped before its end ends as cancelled when the last reference goes.
final class BodyEnd: Sendable {
    let lease: StreamLease
    let watch: BodyWatch

    init(lease: StreamLease, watch: BodyWatch) {
        self.lease = lease
        self.watch = watch
    }

    /// Ends the exchange: `nil` when the whole body arrived.
    func finish(_ error: HTTPDNSError?) {
        lease.end()
        watch.end(error)
    }

    deinit {
        finish(HTTPDNSError(code: .cancelled, message: "the body was dropped before its end"))
    }
}

/// Runs `onEnd` once: at ``end()``, or when the last reference goes away (a body dropped unread).
final class StreamLease: Sendable {
    private let ended = Atomic<Bool>(false)
    private let onEnd: @Sendable () -> Void

    init(onEnd: @escaping @Sendable () -> Void) { self.onEnd = onEnd }

    func end() {
        if !ended.exchange(true, ordering: .acquiringAndReleasing) { onEnd() }
    }

    deinit { end() }
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
