package import NIOCore
import NIOHTTP1
import NIOHTTP2

/// Holds a pinned exchange to its deadline until the response's last byte, on the connection itself.
///
/// AsyncHTTPClient's async `execute` drops its deadline once the response head arrived, and its client-wide read
/// timeout is not per request, so a server that stalls mid-body would hold the reader for ever. Rather than a task per
/// request that reads the body on the caller's behalf (a task and two hand-overs per part, most of a request's cost on
/// loopback), each pinned client's connections (HTTP/1.1) and streams (HTTP/2) get a handler behind the response
/// decoder. A request that carries ``header`` (the deadline in `NIODeadline` uptime nanoseconds) arms a timer there as
/// its head goes out; the header is removed before the head is encoded, so it never reaches the wire. When the
/// response ends first the timer is cancelled; when the deadline comes first the exchange fails with ``Exceeded``
/// (AsyncHTTPClient hands it to the body's reader) and the connection or stream is closed.
package enum ExchangeDeadline {
    /// The request header that carries the deadline from the front to the connection.
    package static let header = "x-httpdns-exchange-deadline"

    /// The exchange's deadline passed before its response ended.
    package struct Exceeded: Error, CustomStringConvertible {
        package var description: String { "the exchange's deadline passed before the response ended" }

        package init() {}
    }

    /// `deadline` as the value of ``header``; `nil` for a deadline too far away to need a timer.
    package static func headerValue(for deadline: NIODeadline) -> String? {
        deadline == .distantFuture ? nil : String(deadline.uptimeNanoseconds)
    }

    /// Puts the handler behind the response decoder of a new HTTP/1.1 connection (AsyncHTTPClient's
    /// `http1_1ConnectionDebugInitializer`).
    @Sendable
    static func installOnConnection(_ channel: any Channel) -> EventLoopFuture<Void> {
        onLoop(channel) { pipeline in
            let decoder = try pipeline.context(handlerType: ByteToMessageHandler<HTTPResponseDecoder>.self)
            try pipeline.addHandler(Handler(), position: .after(decoder.handler))
        }
    }

    /// Puts the handler behind the HTTP/2 to HTTP/1 codec of a new stream (AsyncHTTPClient's
    /// `http2StreamChannelDebugInitializer`).
    @Sendable
    static func installOnStream(_ channel: any Channel) -> EventLoopFuture<Void> {
        onLoop(channel) { pipeline in
            let codec = try pipeline.context(handlerType: HTTP2FramePayloadToHTTP1ClientCodec.self)
            try pipeline.addHandler(Handler(), position: .after(codec.handler))
        }
    }

    private static func onLoop(
        _ channel: any Channel, _ body: @escaping (ChannelPipeline.SynchronousOperations) throws -> Void
    ) -> EventLoopFuture<Void> {
        let install = { () throws -> Void in try body(channel.pipeline.syncOperations) }
        if channel.eventLoop.inEventLoop {
            return channel.eventLoop.makeCompletedFuture(withResultOf: install)
        }
        // AsyncHTTPClient calls the initializers on the channel's loop; this is only a fallback.
        let unchecked = UncheckedInstall(install: install)
        return channel.eventLoop.submit { try unchecked.install() }
    }

    /// Carries an install closure to the channel's loop, where alone it runs.
    private struct UncheckedInstall: @unchecked Sendable {
        let install: () throws -> Void
    }

    /// Holds each exchange whose request head carries ``header`` to that deadline. AsyncHTTPClient runs one exchange
    /// at a time on a connection or stream, so one timer is enough.
    ///
    /// The timer outlives the exchange: the next exchange on a keep-alive connection usually has a later deadline and
    /// keeps it, and when it fires before that deadline it is armed again for it. So an exchange schedules no timer
    /// of its own unless its deadline is earlier than the armed one.
    final class Handler: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias InboundOut = HTTPClientResponsePart
        typealias OutboundIn = HTTPClientRequestPart
        typealias OutboundOut = HTTPClientRequestPart

        /// The deadline of the exchange in progress; `nil` between exchanges.
        private var deadline: NIODeadline?
        /// The armed timer and when it fires.
        private var timer: (task: Scheduled<Void>, firesAt: NIODeadline)?

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            guard case .head(var head) = unwrapOutboundIn(data), let value = head.headers.first(name: header) else {
                context.write(data, promise: promise)
                return
            }
            head.headers.remove(name: header)
            if let nanoseconds = UInt64(value) {
                let deadline = NIODeadline.uptimeNanoseconds(nanoseconds)
                self.deadline = deadline
                // A timer that fires by this deadline stays (if early, it is armed again for this one then).
                if timer.map({ $0.firesAt > deadline }) ?? true {
                    timer?.task.cancel()
                    arm(context: context, at: deadline)
                }
            } else {
                deadline = nil
            }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        }

        private func arm(context: ChannelHandlerContext, at firesAt: NIODeadline) {
            let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: firesAt) { [weak self] () -> Void in
                guard let self else { return }
                self.timerFired(context: context)
            }
            timer = (task, firesAt)
        }

        private func timerFired(context: ChannelHandlerContext) {
            timer = nil
            guard let deadline else { return }
            guard deadline <= .now() else {
                arm(context: context, at: deadline)
                return
            }
            self.deadline = nil
            context.fireErrorCaught(Exceeded())
            context.close(promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .end = unwrapInboundIn(data) { deadline = nil }
            context.fireChannelRead(data)
        }

        func channelInactive(context: ChannelHandlerContext) {
            disarm()
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            disarm()
        }

        private func disarm() {
            deadline = nil
            timer?.task.cancel()
            timer = nil
        }
    }
}
