import HTTPDNS
import Logging
import NIOCore

/// What every exchange of one connection shares, and the one way a request becomes an answer for both HTTP/1.1
/// and HTTP/2.
struct Exchange: Sendable {
    /// Per-request limits.
    struct Limits: Sendable {
        var maximumBodyBytes: Int
    }

    var service: HTTPDNSService
    var limits: Limits
    var logger: Logger
    /// The connection's peer, read once.
    var client: IPAddress?
    /// How this connection's (or socket's) requests arrive.
    var transport: ServiceRequest.Transport
    /// The answers kept on the connection's event loop (see ``AnswerMemo``).
    var memo: NIOLoopBoundBox<AnswerMemo>?
    /// Which listener accepted the connection.
    var listener: ServiceRequest.Listener = .service
    /// The admin listener's DNS rebinding defences (`nil` on the public listeners).
    var adminOrigin: AdminOrigin?

    /// Answers `request`. When nothing needs waiting (an error, or every lookup answered by a local layer or the
    /// cache) the answer is returned at once, on the event loop, without a task switch. Otherwise `nil` comes back
    /// and the handler `later` makes runs on `eventLoop` with the answer (made only then: nothing is allocated for it on
    /// a cache hit). When `later` gives no handler (a front at its bound of waiting requests), the request is dropped
    /// unanswered. A request that must wait takes a place among the upstream lookups of its client network (see
    /// ``UpstreamBudget``); without one it is answered at once with ``HTTPDNSService/upstreamBusy``. `waiting`, called
    /// before this returns `nil`, is given the wait, for the front to cancel when its client goes away.
    func answer(
        _ request: ServiceRequest, on eventLoop: any EventLoop,
        later: () -> NIOLoopBound<(ServiceResponse) -> Void>?,
        waiting: (UpstreamWait) -> Void = { _ in }
    ) -> ServiceResponse? {
        let started = ContinuousClock.now
        var request = request
        request.transport = transport
        request.listener = listener
        service.takeForwardedClient(&request)
        let memo = memo?.value
        let plan = service.plan(request, memo: memo, now: started)
        if let (response, steadyFor) = service.immediateResponse(plan) {
            if let memo, let steadyFor, let (message, generation, stamp) = plan.memoizable {
                memo.keep(
                    response, to: message, name: plan.name, generation: generation, steadyFor: steadyFor,
                    now: started, stamp: stamp, echoesSubnet: plan.echoesSubnet)
            }
            service.finished(request, plan: plan, response: response, started: started, waited: false)
            return response
        }
        let (service, asked) = (self.service, request)
        let ticket = service.admitUpstream(request, relay: plan.relays)
        // Only a verified request may wait for a place (see `UpstreamBudget`): the others are refused at once.
        guard ticket != nil || (!request.unverified && service.configuration.upstreamQueueWait > .zero) else {
            let response = HTTPDNSService.upstreamBusy
            service.finished(request, plan: plan, response: response, started: started, waited: false)
            return response
        }
        guard let later = later() else {
            if let ticket { service.releaseUpstream(ticket) }
            return nil
        }
        // The lookups, once a place is taken; the answer goes back to the event loop as one task (no promise and
        // callback list to build for it).
        let run = { @Sendable (ticket: UpstreamBudget.Ticket, admitted: ContinuousClock.Instant) in
            Task {
                let response = await service.complete(plan)
                service.releaseUpstream(ticket, admitted: admitted, abandoned: Task.isCancelled)
                eventLoop.execute {
                    service.finished(asked, plan: plan, response: response, started: started, waited: true)
                    later.value(response)
                }
            }
        }
        if let ticket {
            // A miss the loop can ask itself goes out from here, and its answer comes back here: no task.
            let loopWait = service.answerOnLoop(plan, on: eventLoop, ticket: ticket, admitted: started) { response in
                service.finished(asked, plan: plan, response: response, started: started, waited: true)
                later.value(response)
            }
            waiting(loopWait ?? UpstreamWait(task: run(ticket, started)))
            return nil
        }
        // The network's share is taken: wait for one of its places, briefly.
        let queued = QueuedUpstreamStart(budget: service.upstreamBudget)
        let admission = service.admitUpstream(request, relay: plan.relays) { ticket in
            if !queued.start({ run(ticket, ContinuousClock.now) }) { service.releaseUpstream(ticket) }
        }
        switch admission {
        case .admitted(let ticket):
            waiting(UpstreamWait(task: run(ticket, started)))
        case .refused:
            let response = HTTPDNSService.upstreamBusy
            service.finished(request, plan: plan, response: response, started: started, waited: false)
            return response
        case .queued(let place):
            queued.queued(at: place)
            waiting(UpstreamWait(queued: queued))
            eventLoop.scheduleTask(in: TimeAmount(service.configuration.upstreamQueueWait)) {
                guard queued.expire() else { return }
                service.refusedAfterWaiting()
                let response = HTTPDNSService.upstreamBusy
                service.finished(asked, plan: plan, response: response, started: started, waited: true)
                later.value(response)
            }
        }
        return nil
    }

    /// The client's address: the connection's peer. An IPv4 client of a dual-stack listener (`::ffff:a.b.c.d`) is
    /// given as its IPv4 address, so logs, limits and reports see the same client either way.
    static func clientAddress(_ channel: any Channel) -> IPAddress? {
        clientAddress(channel.remoteAddress)
    }

    /// The client's address for a peer's socket address (a UDP datagram's source, say), as above.
    static func clientAddress(_ address: SocketAddress?) -> IPAddress? {
        guard let address else { return nil }
        switch address {
        // sockaddr_in: family and port (4 bytes), then the address; sockaddr_in6: family, port, flow info
        // (8 bytes), then the address.
        case .v4(let v4):
            return withUnsafeBytes(of: v4.address) { IPAddress(ipv4: $0[4], $0[5], $0[6], $0[7]) }
        case .v6(let v6):
            return withUnsafeBytes(of: v6.address) { raw in
                let bytes = raw[8..<24]
                let mapped =
                    bytes.prefix(10).allSatisfy { $0 == 0 } && bytes.dropFirst(10).prefix(2).allSatisfy { $0 == 0xff }
                return IPAddress(bytes: mapped ? bytes.suffix(4) : bytes)
            }
        default:
            return nil
        }
    }
}
