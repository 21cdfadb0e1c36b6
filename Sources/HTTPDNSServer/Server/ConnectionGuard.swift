import NIOCore
import NIOTLS

/// The deadlines and the write back-pressure of one connection, at the front of its pipeline (right after TLS).
///
/// One timer per connection, re-armed as the connection moves on, closes it when the earliest deadline passes:
/// - the TLS handshake must end within ``Limits/handshakeTimeout`` of the accept;
/// - the first request head must be complete within ``Limits/headTimeout`` of the handshake (or the accept);
/// - HTTP/1.1: a request head, from its first byte, within ``Limits/headTimeout``;
/// - a request body, from its head, within ``Limits/bodyTimeout`` (on HTTP/2, the oldest stream still sending);
/// - with no request in progress, the connection is closed ``Limits/idleTimeout`` after its last complete request.
///   Bytes do not restart this clock: a client that trickles a byte now and then is closed all the same.
///
/// Back-pressure: while the channel is not writable (its queued answers are over the high water mark) the guard
/// holds the channel's reads, so a client that does not read its answers stops being read from; the request handlers
/// also hold requests they have already decoded. A connection that stays unwritable for ``Limits/writeTimeout``, or
/// whose queued bytes pass ``Limits/maximumQueuedBytes``, is closed.
///
/// The request handlers report progress by calling ``record(_:)`` directly (they sit in the same pipeline, on the
/// same event loop): a user event would cost a walk through the HTTP/2 handler for every request.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The connection's deadlines and bounds.
    struct Limits: Sendable {
        var handshakeTimeout: TimeAmount
        var headTimeout: TimeAmount
        var bodyTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var writeTimeout: TimeAmount
        var maximumQueuedBytes: Int
    }

    /// Why a connection was closed by its guard.
    enum Reason: String, Sendable {
        case handshake, head, body, idle, write, queued
    }

    private let limits: Limits
    private let onClose: (Reason) -> Void
    /// Where ``Connections`` reads whether the connection is idle (to shed the longest-idle one at the limit).
    private let activity: ConnectionActivity?
    /// What `activity` was last told: idle (no request in progress, handshake done).
    private var toldIdle = false
    private var handshaking: Bool
    private var isHTTP2 = false
    private var servedAny = false
    /// When the connection last had no request in progress (accept, handshake, or the last answer).
    private var quietSince: NIODeadline
    /// HTTP/1.1: when the first byte of the head being received arrived.
    private var headStarted: NIODeadline?
    /// Requests whose head arrived and whose body has not ended, by stream (HTTP/1.1: 1), with their head's time.
    private var receiving: [UInt32: NIODeadline] = [:]
    /// Requests complete and not yet answered.
    private var answering = 0
    private var unwritableSince: NIODeadline?
    private var heldRead = false
    private var timer: Scheduled<Void>?
    private var armedFor: NIODeadline?
    private var closed = false
    /// This handler's context while it is in the pipeline.
    private var context: ChannelHandlerContext?

    /// - Parameters:
    ///   - tls: Whether a TLS handshake comes first.
    ///   - activity: Told whether the connection is idle.
    ///   - onClose: Told why, when the guard closes the connection.
    init(limits: Limits, tls: Bool, activity: ConnectionActivity? = nil, onClose: @escaping (Reason) -> Void) {
        self.limits = limits
        self.handshaking = tls
        self.activity = activity
        self.onClose = onClose
        self.quietSince = .now()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        quietSince = .now()
        rearm(context: context)
        tellActivity()
    }

    /// Tells ``activity`` when the connection turns idle or busy (a store only on a change).
    private func tellActivity() {
        guard let activity else { return }
        let idle = !handshaking && headStarted == nil && receiving.isEmpty && answering == 0
        guard idle != toldIdle else { return }
        toldIdle = idle
        if idle { activity.idle(since: quietSince) } else { activity.busy() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // HTTP/1.1: the first byte while nothing is in progress starts a head (HTTP/2 frames such as PING and
        // SETTINGS do not count as a request).
        if !isHTTP2, !handshaking, headStarted == nil, receiving.isEmpty, answering == 0 {
            headStarted = .now()
            rearm(context: context)
            tellActivity()
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event {
            handshaking = false
            isHTTP2 = negotiated == "h2"
            quietSince = .now()
            rearm(context: context)
            tellActivity()
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Takes note of a request's progress. Call it on the connection's event loop.
    ///
    /// Only a new request head, or an idle time shorter than the deadline armed, can bring the earliest deadline
    /// forward; every other event moves it later or removes it, so the timer already armed is left to fire, look
    /// again and re-arm (no timer work for most requests).
    func record(_ event: ConnectionEvent) {
        var earlier = false
        defer {
            if !earlier, let armedFor, receiving.isEmpty, answering == 0 {
                earlier = quietSince + limits.idleTimeout < armedFor
            }
            if earlier || timer == nil, let context { rearm(context: context) }
            tellActivity()
        }
        switch event {
        case .http2:
            isHTTP2 = true
        case .head(let stream):
            headStarted = nil
            receiving[stream] = .now()
            earlier = true
        case .complete(let stream):
            headStarted = nil
            if !receiving.isEmpty { receiving[stream] = nil }
            answering += 1
        case .answered:
            answering = max(answering - 1, 0)
            servedAny = true
            if answering == 0, receiving.isEmpty { quietSince = .now() }
        case .abandoned(let stream):
            if receiving.removeValue(forKey: stream) != nil, answering == 0, receiving.isEmpty { quietSince = .now() }
        }
    }

    func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            heldRead = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unwritableSince = nil
            if heldRead {
                heldRead = false
                context.read()
            }
        } else if unwritableSince == nil {
            unwritableSince = .now()
        }
        rearm(context: context)
        context.fireChannelWritabilityChanged()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        if !context.channel.isWritable,
            let queued = try? context.channel.syncOptions?.getOption(.bufferedWritableBytes),
            queued > limits.maximumQueuedBytes
        {
            close(context: context, .queued)
        }
    }

    /// The earliest deadline in force now.
    private var deadline: NIODeadline? {
        var earliest: NIODeadline?
        func consider(_ candidate: NIODeadline) { earliest = min(earliest ?? candidate, candidate) }
        if let unwritableSince { consider(unwritableSince + limits.writeTimeout) }
        if handshaking {
            consider(quietSince + limits.handshakeTimeout)
            return earliest
        }
        if let oldest = receiving.values.min() { consider(oldest + limits.bodyTimeout) }
        if receiving.isEmpty, answering == 0 {
            if let headStarted {
                consider(headStarted + limits.headTimeout)
            } else {
                consider(quietSince + (servedAny ? limits.idleTimeout : limits.headTimeout))
            }
        }
        return earliest
    }

    private var reasonNow: Reason {
        let now = NIODeadline.now()
        if let unwritableSince, unwritableSince + limits.writeTimeout <= now { return .write }
        if handshaking { return .handshake }
        if !receiving.isEmpty { return .body }
        if headStarted != nil || !servedAny { return .head }
        return .idle
    }

    private func rearm(context: ChannelHandlerContext) {
        guard !closed else { return }
        guard let deadline else {
            timer?.cancel()
            timer = nil
            armedFor = nil
            return
        }
        // An earlier timer is kept when it fires no later than needed: it re-checks and re-arms when it fires.
        if let armedFor, armedFor <= deadline, timer != nil { return }
        timer?.cancel()
        armedFor = deadline
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (guardHandler, context) = bound.value
            guardHandler.fire(context: context)
        }
    }

    private func fire(context: ChannelHandlerContext) {
        timer = nil
        armedFor = nil
        guard !closed else { return }
        if let deadline, deadline <= .now() {
            close(context: context, reasonNow)
        } else {
            rearm(context: context)
        }
    }

    private func close(context: ChannelHandlerContext, _ reason: Reason) {
        guard !closed else { return }
        closed = true
        timer?.cancel()
        timer = nil
        onClose(reason)
        context.close(promise: nil)
    }
}

/// What a request handler tells its connection's ``ConnectionGuard``.
enum ConnectionEvent: Sendable {
    /// The connection speaks HTTP/2.
    case http2
    /// A request's head arrived; its body is still to come (HTTP/1.1 uses stream 1).
    case head(UInt32)
    /// A request arrived whole and is being answered.
    case complete(UInt32)
    /// An answer was written (or dropped because the stream went away).
    case answered
    /// A request stopped before it was complete (its stream was reset).
    case abandoned(UInt32)
}
