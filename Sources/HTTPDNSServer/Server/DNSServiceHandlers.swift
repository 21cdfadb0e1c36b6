import CoreMetrics
import HTTPDNS
import NIOCore
import Synchronization

/// The service's RFC 8484 request for a DNS message that came over UDP, TCP or TLS: the same path, limits, kept
/// answers, metrics and logs as DoH.
private func serviceRequest(_ message: [UInt8], client: IPAddress?) -> ServiceRequest {
    ServiceRequest(
        method: "POST", target: "/dns-query", contentType: "application/dns-message", body: message, client: client)
}

/// Plain DNS over UDP (RFC 1035): one datagram, one answer, to the address it came from.
///
/// Answers that need no waiting are written at once and flushed once per read burst; answers from upstreams are
/// flushed once per batch of the event loop's tasks (see ``LateAnswerFlushing``). Nothing is queued without
/// bound: while the socket cannot take more, answers are dropped (UDP may lose them anyway, and the client asks
/// again), and at most ``maximumWaiting`` queries wait for an upstream at once (more are dropped; the service's upstream
/// budget also bounds them per network, apart from verified transports). A query still waiting after ``askerTimeout``
/// is given up: its asker has asked again or gone (stub resolvers wait about 5 s), so its lookup is cancelled unless
/// another asker shares it, its place is given back, and a late answer is never sent (it could be taken for the
/// answer to the retry). A rate-limited query is dropped, except
/// every ``slip``th, which gets a truncated answer (TC) so that a real client behind the limit asks again over TCP,
/// as response-rate limiting in BIND and Knot does; the UDP rate limit is its own, so queries forged in a client's
/// name do not cost it its TCP, DNS-over-TLS or HTTPS allowance. A datagram that
/// is a response, or too short for a header, gets nothing (no reflection loops between servers); an answer larger
/// than the client's EDNS size or ``DNSTransportWire/amplificationFactor`` times the query goes out truncated.
final class DNSDatagramHandler: ChannelInboundHandler, LateAnswerFlushing {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    /// Queries waiting for an upstream at once on this socket.
    static let maximumWaiting = 1_024
    /// One rate-limited query in this many is answered TC instead of dropped.
    static let slip = 2
    /// How long a query waits for an upstream before it is given up (checked by one timer for the socket, which
    /// looks at most every ``sweepInterval``: a query may wait that much longer).
    static let askerTimeout = TimeAmount.seconds(5)
    /// The least time between two looks for queries past ``askerTimeout``.
    static let sweepInterval = TimeAmount.milliseconds(250)

    private let exchange: Exchange
    /// The queries waiting for an upstream, by a number of their own, with the time they are given up; a query not
    /// here was given up (or answered). At most ``maximumWaiting``.
    private var waits: [Int: (wait: UpstreamWait, deadline: NIODeadline)] = [:]
    /// Gives up the queries past their deadline; armed while any query waits (one timer, not one a query).
    private var sweep: Scheduled<Void>?
    private var nextWait = 0
    private var wrote = false
    var lateFlushQueued = false
    private let rateLimited: RateLimitedCount
    /// The server cookies of the listener (one key for all its sockets).
    private let cookies: DNSCookies

    /// The rate-limited queries of one UDP listener, counted across its sockets (one per event loop, on one port), so
    /// that one in ``slip`` slips whichever socket the kernel gave a query to.
    final class RateLimitedCount: Sendable {
        private let count = Atomic<Int>(0)

        /// Counts one more and tells whether it is the one in ``slip`` that slips.
        func nextSlips() -> Bool {
            count.add(1, ordering: .relaxed).newValue % DNSDatagramHandler.slip == 0
        }
    }

    init(_ exchange: Exchange, rateLimited: RateLimitedCount = RateLimitedCount(), cookies: DNSCookies = DNSCookies()) {
        self.exchange = exchange
        self.rateLimited = rateLimited
        self.cookies = cookies
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let received = Array(envelope.data.readableBytesView)
        // Only queries: never answer an answer (two servers would bounce it for ever).
        guard received.count >= 12, received[2] & 0x80 == 0 else { return }
        var exchange = self.exchange
        exchange.client = Exchange.clientAddress(envelope.remoteAddress)
        let remote = envelope.remoteAddress
        // A DNS cookie (RFC 7873): a valid server cookie proves the source; the service sees the query without the
        // option (so kept answers are shared by every client), and the answer gets the client's cookie back with a
        // new server cookie.
        var query = received
        var cookie: [UInt8]?
        var verified = false
        switch DNSCookies.find(in: received) {
        case .none:
            break
        case .malformed:
            // FORMERR, within the UDP rate like every answer (a forged source must not get unlimited ones).
            guard exchange.service.limiter.admit(exchange.client, unverified: true) == nil else { return }
            send(.text(400, "malformed cookie"), to: received, remote: remote, context: context)
            return
        case .cookie(let client, let server, let stripped):
            let now = UInt32(truncatingIfNeeded: exchange.service.now())
            verified =
                server.map { cookies.isValid(server: $0, client: client, address: exchange.client, now: now) }
                ?? false
            query = stripped
            cookie = cookies.option(client: client, address: exchange.client, now: now)
        }
        let waitID = nextWait
        nextWait &+= 1
        // Everything for a wait is made in these two closures, which only a query that waits calls: a cache hit
        // allocates nothing for it.
        let later = { [self] () -> NIOLoopBound<(ServiceResponse) -> Void>? in
            // At the bound, a query that needs an upstream is dropped: the client asks again. (The exchange hands
            // over the wait of each query it calls this for before it returns.)
            guard waits.count < Self.maximumWaiting else {
                self.exchange.service.metrics.udpDropped.increment()
                return nil
            }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            return NIOLoopBound<(ServiceResponse) -> Void>(
                { response in
                    let (handler, context) = bound.value
                    // Given up already: nobody waits for this answer.
                    guard handler.waits.removeValue(forKey: waitID) != nil else { return }
                    handler.send(response, to: received, remote: remote, cookie: cookie, context: context)
                    handler.flushAfterLoopTasks(context: context)
                }, eventLoop: context.eventLoop)
        }
        let onWait = { [self] (wait: UpstreamWait) in
            let deadline = NIODeadline.now() + Self.askerTimeout
            waits[waitID] = (wait, deadline)
            if sweep == nil { armSweep(at: deadline, context: context) }
        }
        var request = serviceRequest(query, client: exchange.client)
        request.verifiedSource = verified
        if let response = exchange.answer(request, on: context.eventLoop, later: later, waiting: onWait) {
            send(response, to: received, remote: remote, cookie: cookie, context: context)
        }
    }

    /// Gives up, at `deadline`, the queries past theirs, and looks again at the next deadline while any wait.
    private func armSweep(at deadline: NIODeadline, context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        sweep = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.sweep = nil
            let now = NIODeadline.now()
            var next: NIODeadline?
            var overdue: [Int] = []
            for (waitID, entry) in handler.waits {
                if entry.deadline <= now {
                    overdue.append(waitID)
                } else {
                    next = min(next ?? entry.deadline, entry.deadline)
                }
            }
            for waitID in overdue {
                // Its lookup is cancelled unless another asker shares it, and its place comes back.
                handler.waits.removeValue(forKey: waitID)?.wait.cancel()
                handler.exchange.service.metrics.udpDropped.increment()
            }
            if let next { handler.armSweep(at: max(next, now + Self.sweepInterval), context: context) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The socket closed (shutdown): nothing waiting can be answered any more.
        sweep?.cancel()
        sweep = nil
        for entry in waits.values { entry.wait.cancel() }
        waits = [:]
        context.fireChannelInactive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushLateAnswers(context: context)
        context.fireChannelReadComplete()
    }

    func flushLateAnswers(context: ChannelHandlerContext) {
        guard wrote else { return }
        wrote = false
        context.flush()
    }

    /// Sends the answer to `query` (as received), with `cookie` (a COOKIE option) in its OPT record when given.
    private func send(
        _ response: ServiceResponse, to query: [UInt8], remote: SocketAddress, cookie: [UInt8]? = nil,
        context: ChannelHandlerContext
    ) {
        var message = DNSTransportWire.message(for: response, query: query, overUDP: true)
        if message == nil, response.status == 429 {
            if rateLimited.nextSlips() { message = DNSTransportWire.slipped(query) }
        }
        guard var message else { return }
        // Answers only: a slipped or refused answer (TC) stays no larger than its query, cookie or not.
        if let cookie, response.status == 200, let withCookie = DNSMessageWalk.appendingOption(cookie, to: message) {
            message = withCookie
        }
        guard context.channel.isWritable else {
            exchange.service.metrics.udpDropped.increment()
            return
        }
        let answer = DNSTransportWire.truncated(message, limit: DNSTransportWire.udpLimit(for: query))
        var buffer = context.channel.allocator.buffer(capacity: answer.count)
        buffer.writeBytes(answer)
        context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: remote, data: buffer)), promise: nil)
        wrote = true
    }
}

/// DNS over TCP (RFC 7766) and, behind TLS, DNS over TLS (RFC 7858): messages with a two-byte length, pipelined,
/// answered as they are ready (out of order when an upstream is asked for one of them).
///
/// At most ``maximumInFlight`` queries of a connection are answered at once; past that the connection is not read
/// (the client's further queries wait in its socket), and the guard in front holds reads while answers are queued
/// unsent, so a client that sends without reading costs a bounded amount. The guard also times the TLS handshake, a
/// message that arrives too slowly (as a request head) and the idle time after the last answer.
final class DNSStreamHandler: ChannelDuplexHandler, LateAnswerFlushing {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Queries of one connection being answered at once.
    static let maximumInFlight = 128

    private let exchange: Exchange
    private let connectionGuard: ConnectionGuard
    // The state below is touched per message, on the channel's event loop only, and no access to it stays open
    // across a call that could reach it again (the framer calls nothing out; the service's answer and the handlers
    // of later answers run after each access ends): so it is not checked for exclusive access at run time, which
    // cost a thread-local lookup per access (`swift_beginAccess`, `__tls_get_addr` in a DoT profile).
    @exclusivity(unchecked) private var framer = DNSStreamFramer()
    @exclusivity(unchecked) private var inFlight = 0
    /// The waits of the queries answered from upstreams, by a number of their own: cancelled when the connection
    /// closes (nobody reads those answers any more).
    @exclusivity(unchecked) private var waits: [Int: UpstreamWait] = [:]
    @exclusivity(unchecked) private var nextWait = 0
    @exclusivity(unchecked) private var heldRead = false
    @exclusivity(unchecked) private var wrote = false
    @exclusivity(unchecked) private var reading = false
    @exclusivity(unchecked) private var closed = false
    @exclusivity(unchecked) var lateFlushQueued = false

    init(_ exchange: Exchange, connectionGuard: ConnectionGuard) {
        self.exchange = exchange
        self.connectionGuard = connectionGuard
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        framer.append(&bytes)
        reading = true
        takeMessages(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        flushLateAnswers(context: context)
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if inFlight >= Self.maximumInFlight {
            heldRead = true
        } else {
            context.read()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        for wait in waits.values { wait.cancel() }
        waits = [:]
        context.fireChannelInactive()
    }

    /// Answers every whole message received, up to the in-flight bound.
    private func takeMessages(context: ChannelHandlerContext) {
        while !closed, inFlight < Self.maximumInFlight {
            switch framer.next() {
            case .message(let message):
                answer(message, context: context)
            case .needMore:
                return
            case .invalid:
                closed = true
                context.close(promise: nil)
                return
            }
        }
    }

    private func answer(_ query: [UInt8], context: ChannelHandlerContext) {
        inFlight += 1
        connectionGuard.record(.complete(1))
        let waitID = nextWait
        nextWait &+= 1
        let later = { [self] () -> NIOLoopBound<(ServiceResponse) -> Void>? in
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            return NIOLoopBound<(ServiceResponse) -> Void>(
                { response in
                    let (handler, context) = bound.value
                    handler.waits[waitID] = nil
                    handler.send(response, to: query, context: context)
                    handler.flushAfterLoopTasks(context: context)
                }, eventLoop: context.eventLoop)
        }
        if let response = exchange.answer(
            serviceRequest(query, client: exchange.client), on: context.eventLoop, later: later,
            waiting: { waits[waitID] = $0 })
        {
            send(response, to: query, context: context)
        }
    }

    private func send(_ response: ServiceResponse, to query: [UInt8], context: ChannelHandlerContext) {
        inFlight -= 1
        connectionGuard.record(.answered)
        if !closed, var message = DNSTransportWire.message(for: response, query: query, overUDP: false) {
            // A stream's two-byte length carries at most 65,535 bytes: anything longer goes out truncated.
            message = DNSTransportWire.truncated(message, limit: 65_535)
            var buffer = context.channel.allocator.buffer(capacity: message.count + 2)
            DNSStreamFramer.write(message, into: &buffer)
            context.write(wrapOutboundOut(buffer), promise: nil)
            wrote = true
        }
        // Below the bound again: take what was waiting, and read again if reads were held for it.
        if !reading, inFlight < Self.maximumInFlight {
            takeMessages(context: context)
            if heldRead, inFlight < Self.maximumInFlight {
                heldRead = false
                context.read()
            }
        }
    }

    func flushLateAnswers(context: ChannelHandlerContext) {
        guard wrote else { return }
        wrote = false
        context.flush()
    }
}
