import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Synchronization

/// Collects a response on the event loop, with a size cap, the time to the response head, and whether any of the
/// request was sent.
///
/// `@unchecked Sendable`: AsyncHTTPClient calls every delegate method on the request's event loop, one at a time, so
/// the mutable fields are only touched there; `requestSent` is an atomic because the caller reads it after a failure.
final class ResponseCollector: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = PinnedTransport.Response

    struct TooLarge: Error {}

    private let limit: Int
    private let started = ContinuousClock.now
    private let sent = Atomic<Bool>(false)
    private var head: HTTPResponseHead?
    private var headLatency: Duration = .zero
    private var body: ByteBuffer?

    init(limit: Int) { self.limit = limit }

    var requestSent: Bool { sent.load(ordering: .acquiring) }

    func didSendRequestHead(task: HTTPClient.Task<Response>, _ head: HTTPRequestHead) {
        sent.store(true, ordering: .releasing)
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.head = head
        headLatency = ContinuousClock.now - started
        if let length = head.headers.first(name: "Content-Length").flatMap(Int.init), length > limit {
            return task.eventLoop.makeFailedFuture(TooLarge())
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        var part = buffer
        if body == nil {
            body = part
        } else {
            body!.writeBuffer(&part)
        }
        if (body?.readableBytes ?? 0) > limit { return task.eventLoop.makeFailedFuture(TooLarge()) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        guard let head else { throw HTTPClientError.remoteConnectionClosed }
        return Response(
            status: Int(head.status.code),
            version: "HTTP/\(head.version.major).\(head.version.minor)",
            headers: head.headers.map { ($0.name, $0.value) },
            body: body ?? ByteBuffer(),
            headLatency: headLatency
        )
    }
}
