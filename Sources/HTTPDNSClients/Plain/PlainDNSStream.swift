import HTTPDNSCore
import NIOCore
import NIOPosix

/// A query over TCP (RFC 7766): a truncated answer asked again, or every query with `cares.tcp`. One connection a
/// query, closed with its answer or its try.
enum PlainDNSStream {
    /// Connects to `server` and asks `query`'s current message; the answer, a failure or the try's end decide.
    static func ask(_ query: PlainDNSEngine.Query, server: SocketAddress, engine: PlainDNSEngine) {
        let generation = query.streams
        ClientBootstrap(group: engine.loop)
            .connectTimeout(TimeAmount(engine.configuration.timeout))
            .connect(to: server)
            .assumeIsolated()
            .whenComplete { result in
                guard case .success(let channel) = result else {
                    // A failure that comes after its try ended (a later try is under way) decides nothing.
                    guard query.streams == generation else { return }
                    return engine.advance(query)
                }
                // The try ended (answered, given up, cancelled) while connecting.
                guard engine.isWaiting(query), query.streams == generation else {
                    return channel.close(promise: nil)
                }
                query.stream = channel
                do {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LengthPrefixedMessages()))
                    try channel.pipeline.syncOperations.addHandler(
                        PlainDNSStreamReceiver(query: query, engine: engine, generation: generation))
                } catch {
                    return engine.advance(query)
                }
                var message = ByteBuffer()
                DNSStreamFramer.write(query.asked, into: &message)
                channel.writeAndFlush(message, promise: nil)
            }
    }
}

/// Messages of a DNS stream, each after its two-byte length.
struct LengthPrefixedMessages: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let message = DNSStreamFramer.takeMessage(from: &buffer) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(message))
        return .continue
    }
}

/// The answer on a query's TCP connection: taken when its ID and question are the query's (a connection carries
/// only what its server sent), else the try fails.
final class PlainDNSStreamReceiver: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let query: PlainDNSEngine.Query
    private let engine: PlainDNSEngine
    private let generation: Int
    private var done = false

    init(query: PlainDNSEngine.Query, engine: PlainDNSEngine, generation: Int) {
        self.query = query
        self.engine = engine
        self.generation = generation
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = Array(unwrapInboundIn(data).readableBytesView)
        guard !done, query.streams == generation else { return }
        done = true
        let id = bytes.count >= 2 ? UInt16(bytes[0]) << 8 | UInt16(bytes[1]) : 0
        guard id == query.id, engine.accepts(bytes, for: query) else {
            engine.mismatched(.question)
            return engine.advance(query)
        }
        engine.answered(query, bytes, overStream: true)
    }

    func channelInactive(context: ChannelHandlerContext) {
        guard !done, query.streams == generation else { return }
        done = true
        engine.advance(query)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
