import NIOCore

/// Many exchanges on one ``HTTP2DNSConnection`` for one caller, run by the connection's event loop as h2load runs
/// its requests: the loop opens streams up to ``window``, and after each read burst it opens as many more as have
/// ended, making each request only then. The caller is suspended once for the whole batch and resumed once, with
/// every outcome; a lookup of its own would cost a task resumed per answer and a hand-over per request.
///
/// Created by the caller, then touched only on the connection's event loop (by ``HTTP2DNSStreams``): that is the
/// whole of its synchronisation, hence `@unchecked Sendable`. The continuation is resumed exactly once, by
/// ``HTTP2DNSStreams`` when no stream of the batch is open and no more will start.
final class HTTP2DNSBatch: @unchecked Sendable {
    /// The number of exchanges and how many may be open at once.
    let count: Int
    let window: Int
    /// Makes exchange `index` (called on the event loop, once per index, in order).
    private let make: @Sendable (Int) -> HTTP2DNSExchange
    /// Each exchange's outcome; `nil` until it ends, and for an exchange never started.
    private var results: [Result<HTTPDNSTransport.Response, any Error>?]
    /// The next index to start, and how many started exchanges have not ended.
    private var next = 0
    private(set) var open = 0
    /// No more exchanges start: the caller was cancelled, or the connection was lost.
    private(set) var stopped = false
    private var cancelled = false
    var continuation: UnsafeContinuation<[Result<HTTPDNSTransport.Response, any Error>?], any Error>?

    init(count: Int, window: Int, make: @escaping @Sendable (Int) -> HTTP2DNSExchange) {
        self.count = count
        self.window = window
        self.make = make
        self.results = Array(repeating: nil, count: count)
    }

    /// The next exchange to start, or `nil` when the window is full or nothing is left to start.
    func nextExchange() -> HTTP2DNSExchange? {
        guard !stopped, open < window, next < count else { return nil }
        let exchange = make(next)
        exchange.batch = self
        exchange.index = next
        next += 1
        open += 1
        return exchange
    }

    /// Records exchange `index`'s outcome.
    func finished(_ index: Int, _ result: Result<HTTPDNSTransport.Response, any Error>) {
        open -= 1
        results[index] = result
    }

    /// Starts no more exchanges; the caller gets `CancellationError`.
    func cancel() {
        stopped = true
        cancelled = true
    }

    /// Starts no more exchanges; those not started stay `nil` for the caller to send elsewhere.
    func stop() { stopped = true }

    /// Whether every started exchange has ended and no more will start.
    var isDone: Bool { open == 0 && (stopped || next == count) }

    /// Resumes the caller with the outcomes (or `CancellationError`); called once, when ``isDone``.
    func complete() {
        guard let continuation else { return }
        self.continuation = nil
        if cancelled {
            continuation.resume(throwing: CancellationError())
        } else {
            let results = self.results
            self.results = []
            continuation.resume(returning: results)
        }
    }
}
