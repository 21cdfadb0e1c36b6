import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization
import HTTPDNSCore
import HTTPDNSHTTP2

/// The connection's stream table: hands requests to the connection's `HTTP2ClientSession` and the bytes the TLS
/// handler decrypted to it, and matches the answers it reports to the waiting exchanges by stream ID. Lives in the
/// channel pipeline after the TLS handler and runs only on the channel's event loop.
final class HTTP2DNSStreams: ChannelInboundHandler, HTTP2ClientSessionDelegate {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    // The closures this handler gives its event loop (the flush, the timer, a write's failure) hold it strongly:
    // each ends when it runs or is cancelled (shutDown cancels the timer), and a weak reference would give the
    // handler a side table, putting every retain and release of it on the slow path.
    private var context: ChannelHandlerContext?
    private var session: HTTP2ClientSession?
    private var active: [Int32: HTTP2DNSExchange] = [:]
    /// Batches with exchanges still to start or still open, refilled after every read burst.
    private var batches: [HTTP2DNSBatch] = []
    private var closed = false
    private var reading = false
    private var flushScheduled = false
    /// One timer for the whole table: at the earliest deadline while streams run, else at the idle limit.
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    private var lastActivity = NIODeadline.now()
    private let idleTimeout: TimeAmount
    private let health: HTTP2ConnectionHealth
    private var timeouts = 0
    private var streamsStarted = 0
    /// Called once: when the server's first SETTINGS frame arrives, or with the error that ended the connection
    /// before it.
    var whenReady: ((Result<Void, any Error>) -> Void)?

    init(idleTimeout: TimeAmount, health: HTTP2ConnectionHealth, settings: HTTP2ClientSession.Settings) throws {
        self.idleTimeout = idleTimeout
        self.health = health
        session = nil
        session = try HTTP2ClientSession(settings: settings, delegate: self)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The connection preface, the SETTINGS and the connection window.
        sendPending()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        shutDown(HTTP2ConnectionLost(message: "the HTTP/2 connection closed", retryable: true))
        self.context = nil
    }

    // MARK: Requests

    /// Opens a stream for `exchange`, its deadline counted from `now`.
    func start(_ exchange: HTTP2DNSExchange, now: NIODeadline) {
        guard !exchange.cancelled else {
            exchange.finish(.failure(CancellationError()))
            return
        }
        guard context != nil, !closed, let session else {
            retire()
            exchange.finish(.failure(HTTP2ConnectionLost(message: "the HTTP/2 connection is closing", retryable: true)))
            return
        }
        let id: Int32
        do {
            id = try session.submit(
                method: exchange.method, authority: exchange.authority, path: exchange.path,
                headers: exchange.headers, body: exchange.body, limit: exchange.limit)
        } catch {
            // Stream IDs used up, or the session is going away: another connection takes it.
            retire()
            exchange.finish(
                .failure(HTTP2ConnectionLost(message: "no new stream on this connection: \(error)", retryable: true)))
            return
        }
        streamsStarted += 1
        if id >= Int32.max - 2 { retire() }
        lastActivity = now
        exchange.streamID = id
        exchange.deadline = now + exchange.timeout
        active[id] = exchange
        scheduleFlush()
        if timerDeadline.map({ $0 > exchange.deadline }) ?? true { arm(at: exchange.deadline) }
    }

    func cancel(_ exchange: HTTP2DNSExchange) {
        exchange.cancelled = true
        guard let id = exchange.streamID, active[id] === exchange else { return }
        complete(id, .failure(CancellationError()))
        reset(id)
    }

    /// Starts `batch`: as many of its exchanges as its window allows, more as they end.
    func run(_ batch: HTTP2DNSBatch) {
        batches.append(batch)
        refillBatches()
    }

    /// Cancels `batch`: nothing more starts, its open streams are reset, and its caller gets `CancellationError`.
    func cancel(_ batch: HTTP2DNSBatch) {
        batch.cancel()
        for (id, exchange) in active where exchange.batch === batch {
            complete(id, .failure(CancellationError()))
            reset(id)
        }
        refillBatches()
    }

    /// Starts what the batches' windows allow and hands finished batches back to their callers. Called after each
    /// read burst (the streams that ended in it free their places, and the new requests go out in the burst's
    /// write) and wherever streams end outside a read.
    private func refillBatches() {
        guard !batches.isEmpty else { return }
        let now = NIODeadline.now()
        var index = 0
        while index < batches.count {
            let batch = batches[index]
            // A closed or retired connection takes no new streams: what a batch has not started goes back to its
            // caller, to be sent elsewhere.
            while !closed, health.usable.load(ordering: .relaxed), let exchange = batch.nextExchange() {
                start(exchange, now: now)
            }
            if closed || !health.usable.load(ordering: .relaxed) { batch.stop() }
            if batch.isDone {
                batches.remove(at: index)
                batch.complete()
            } else {
                index += 1
            }
        }
    }

    // MARK: Bytes

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closed else { return }
        reading = true
        do {
            try session.receive(unwrapInboundIn(data))
        } catch {
            // The server broke the protocol: say so (a GOAWAY is pending) and close.
            sendPending()
            shutDown(HTTP2ConnectionLost(message: "HTTP/2 connection error: \(error)", retryable: true))
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        refillBatches()
        reading = false
        // Acknowledgements, window updates and resets made while reading go out in one write.
        sendPending()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        shutDown(HTTP2ConnectionLost(message: "the HTTP/2 connection closed before the answer", retryable: true))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        shutDown(error)
        context.close(promise: nil)
    }

    // MARK: HTTP2ClientSessionDelegate (called while reading)

    func settingsReceived() {
        guard let whenReady else { return }
        self.whenReady = nil
        // A new connection gets a grace period before its first stream: on a loaded machine the lookup that asked
        // for it may take a while to be scheduled, and closing it would only make another.
        lastActivity = .now()
        arm(at: idleDeadline)
        whenReady(.success(()))
    }

    func responseReceived(stream: Int32, status: Int, contentType: String?, body: [UInt8]) {
        guard let exchange = active[stream] else { return }
        complete(
            stream,
            .success(.init(status: status, contentType: contentType, body: body, server: exchange.server)))
    }

    func responseTooLarge(stream: Int32) {
        guard let exchange = active[stream] else { return }
        complete(stream, .failure(NIOTooManyBytesError(maxBytes: exchange.limit)))
    }

    func streamFailed(stream: Int32, code: UInt32) {
        guard active[stream] != nil else { return }
        let refused = code == HTTP2ClientSession.refusedStream
        complete(
            stream,
            .failure(
                HTTP2ConnectionLost(
                    message: refused
                        ? "the server refused the stream (REFUSED_STREAM)"
                        : "the stream ended without an answer (\(HTTP2ClientSession.errorName(code)))",
                    retryable: refused)))
    }

    func goAwayReceived(lastStream: Int32, code: UInt32) {
        // The streams after lastStream are closed by nghttp2 as refused (sent again on a new connection).
        retire()
    }

    // MARK: Internals

    private func complete(_ id: Int32, _ result: Result<HTTPDNSTransport.Response, any Error>) {
        guard let exchange = active.removeValue(forKey: id) else { return }
        exchange.finish(result)
        if active.isEmpty, !closed, timerDeadline.map({ $0 > idleDeadline }) ?? true { arm(at: idleDeadline) }
    }

    private func reset(_ id: Int32) {
        guard !closed else { return }
        session?.cancel(stream: id)
        scheduleFlush()
    }

    /// Fails every open exchange and stops taking new ones.
    private func shutDown(_ error: any Error) {
        if let whenReady {
            self.whenReady = nil
            whenReady(.failure(error))
        }
        closed = true
        retire()
        timer?.cancel()
        timer = nil
        let open = active
        active.removeAll()
        for exchange in open.values { exchange.finish(.failure(error)) }
        refillBatches()
    }

    /// No new streams: the transport opens another connection for later requests.
    private func retire() { health.usable.store(false, ordering: .relaxed) }

    /// Writes what the session has to send, in one buffer.
    private func sendPending() {
        guard let context, let session else { return }
        var buffer = context.channel.allocator.buffer(capacity: 0)
        do {
            try session.pendingOutput(into: &buffer)
        } catch {
            shutDown(HTTP2ConnectionLost(message: "HTTP/2 session failed: \(error)", retryable: true))
            context.close(promise: nil)
            return
        }
        guard buffer.readableBytes > 0 else { return }
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenFailure { error in
            self.shutDown(HTTP2ConnectionLost(message: "the request could not be sent: \(error)", retryable: true))
        }
    }

    /// Requests started in one event-loop tick go out together (after a read, with its own output).
    private func scheduleFlush() {
        guard !flushScheduled, !reading, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            self.sendPending()
        }
    }

    private func arm(at deadline: NIODeadline) {
        guard let context else { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { self.timerFired() }
    }

    private func timerFired() {
        timer = nil
        timerDeadline = nil
        guard !closed, let context else { return }
        let now = NIODeadline.now()
        var earliest = NIODeadline.distantFuture
        for (id, exchange) in active {
            if exchange.deadline <= now {
                timeouts += 1
                let limit = exchange.timeout
                complete(
                    id,
                    .failure(
                        HTTPDNSError(
                            code: .timeout,
                            message: "no complete HTTP answer within \(Duration.nanoseconds(limit.nanoseconds))")))
                reset(id)
            } else {
                earliest = min(earliest, exchange.deadline)
            }
        }
        // A connection on which many answers never came is not worth keeping: the next one starts clean (and
        // gets back any window that answers to reset streams would have used).
        if timeouts >= 64 { retire() }
        if !active.isEmpty {
            arm(at: earliest)
        } else if now >= idleDeadline {
            retire()
            context.close(promise: nil)
        } else {
            arm(at: idleDeadline)
        }
        // After the timer is set again: batch exchanges started now arm it earlier if they need to.
        refillBatches()
    }

    /// When the connection counts as idle: ``idleTimeout`` after the last stream started, or the first-use grace
    /// period for a connection that has not carried one yet.
    private var idleDeadline: NIODeadline {
        lastActivity + (streamsStarted > 0 ? idleTimeout : max(idleTimeout, .seconds(10)))
    }
}
