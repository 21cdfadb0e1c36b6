import HTTPDNSCore
import Logging
import NIOCore
import NIOPosix

/// One connected UDP socket of a ``PlainDNSEngine`` to one server, on a port the kernel picked at random: the
/// queries sent from it by ID, until it is retired (it has sent its share, or is old) and closes with its last one.
/// Confined to the engine's loop.
final class PlainDNSSocket {
    private let engine: PlainDNSEngine
    /// The largest datagram read whole; one that fills it may have been cut by the kernel and is asked over TCP.
    static let receiveCapacity = 4_096
    /// Datagrams taken in one read (recvmmsg).
    static let datagramsPerRead = 16
    private var channel: (any Channel)?
    /// Datagrams written before the socket was connected.
    private var queued: [ByteBuffer] = []
    private var pending: [UInt16: PlainDNSEngine.Query] = [:]
    private var sent = 0
    private let opened: NIODeadline
    private var retired = false
    private var failed = false

    /// Opens a socket connected to `server` (the kernel binds it to a random ephemeral port).
    init(server: SocketAddress, engine: PlainDNSEngine) {
        self.engine = engine
        opened = .now()
        DatagramBootstrap(group: engine.loop)
            // An answer to a query of ours fits the 1,232-byte EDNS payload it advertises, or 512 without EDNS.
            // Each of a vector read's datagrams gets a slice of the buffer: `receiveCapacity` each.
            .channelOption(
                .recvAllocator,
                value: FixedSizeRecvByteBufferAllocator(
                    capacity: PlainDNSSocket.receiveCapacity * PlainDNSSocket.datagramsPerRead)
            )
            // Room for a burst of answers (the kernel caps it at net.core.rmem_max), as c-ares's sockets had.
            .channelOption(.socketOption(.so_rcvbuf), value: 1 << 20)
            // The answers waiting in the buffer read in one recvmmsg, not a system call each.
            .channelOption(.datagramVectorReadMessageCount, value: PlainDNSSocket.datagramsPerRead)
            .connect(to: server)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    self.channel = channel
                    do {
                        try channel.pipeline.syncOperations.addHandler(PlainDNSReceiver(socket: self))
                    } catch {
                        channel.close(promise: nil)
                        return fail()
                    }
                    for datagram in queued { channel.write(datagram, promise: nil) }
                    queued = []
                    channel.flush()
                    if retired, pending.isEmpty { close() }
                case .failure(let error):
                    engine.logger.notice(
                        "could not open an upstream DNS socket", metadata: ["error": "\(error)"])
                    fail()
                }
            }
    }

    /// Whether new queries may still go out from this socket.
    func isUsable(_ configuration: PlainDNSClient.Configuration, now: NIODeadline) -> Bool {
        !retired && !failed && sent < configuration.queriesPerSocket
            && now - opened < TimeAmount(configuration.socketLifetime)
    }

    /// Sends `query` under a random ID no other query of this socket has.
    func send(_ query: PlainDNSEngine.Query) {
        var id = engine.randomID()
        while pending[id] != nil { id = engine.randomID() }
        query.id = id
        (query.asked[0], query.asked[1]) = (UInt8(id >> 8), UInt8(id & 0xFF))
        pending[id] = query
        query.socket = self
        sent += 1
        let datagram = ByteBuffer(bytes: query.asked)
        if let channel {
            // Flushed once the loop has read its burst: the queries of one burst leave together (one sendmmsg).
            channel.write(datagram, promise: nil)
            engine.flushLater(self)
        } else if !failed {
            queued.append(datagram)
        }
    }

    /// Sends what was written since the last flush.
    func flush() {
        channel?.flush()
    }

    /// A datagram from the server (the connected socket receives from nobody else).
    func received(_ bytes: [UInt8]) {
        guard bytes.count >= 12, let query = pending[UInt16(bytes[0]) << 8 | UInt16(bytes[1])] else {
            return engine.mismatched(.id)
        }
        guard engine.accepts(bytes, for: query) else {
            // Counted, not logged at notice: a forger would fill the log (the counter says it).
            engine.logger.debug(
                "dropped an upstream answer whose question is not the one asked (forged, or a server that folds case)")
            return engine.mismatched(.question)
        }
        engine.answered(query, bytes, overStream: false, cut: bytes.count >= Self.receiveCapacity)
    }

    /// Takes `query` off the socket (answered, given up or moved on); a retired socket closes with its last one.
    func forget(_ query: PlainDNSEngine.Query) {
        if pending[query.id] === query { pending[query.id] = nil }
        if retired, pending.isEmpty { close() }
    }

    /// No new queries go out from here; it closes once its last one is done.
    func retire() {
        retired = true
        if pending.isEmpty { close() }
    }

    /// Closes the socket (queries still on it time out and are asked again from another).
    func close() {
        retired = true
        channel?.close(promise: nil)
        channel = nil
    }

    /// The socket could not be opened or went away (NIO closes a connected UDP socket on some ICMP errors, which an
    /// off-path attacker can forge for any port): its queries leave it and wait for their deadlines, which then ask
    /// again from a new socket. They do not move on at once, or forged ICMP would burn through every try in
    /// milliseconds.
    func fail() {
        failed = true
        channel = nil
        queued = []
        for query in pending.values where query.socket === self { query.socket = nil }
        pending = [:]
    }
}

/// Hands a socket's datagrams to it.
final class PlainDNSReceiver: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let socket: PlainDNSSocket

    init(socket: PlainDNSSocket) {
        self.socket = socket
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        socket.received(Array(envelope.data.readableBytesView))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // ICMP errors of a connected socket come here (ECONNREFUSED leaves it open; others close it, see `fail`):
        // the queries time out and try again; an off-path attacker can forge those messages, so they decide nothing.
    }

    func channelInactive(context: ChannelHandlerContext) {
        socket.fail()
    }
}
