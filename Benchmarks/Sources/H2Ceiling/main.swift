// The ceiling of the server stack hostsctl serve is built on, for Benchmarks/serve.sh: swift-nio-http2 behind
// NIOSSL, with the same pipeline shape as HTTPDNSServer's HTTP/2 path (NIOHTTP2Handler with its default settings,
// then one frame-level handler, answers flushed once per read burst), but no service behind it: every request gets
// the same DNS answer, made once at start. Whatever this reaches on one connection is the most any server on this
// stack can reach; hostsctl serve's figure is read against it.
//
//   H2Ceiling PORT CERTIFICATE.pem KEY.pem
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Answers every request stream with the fixed answer as soon as its request has ended.
final class FixedAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// An A answer for n0.test (127.1.0.0, TTL 3600) with ID 0: the size of what hostsctl serve sends.
    static let answer: [UInt8] = {
        let name: [UInt8] = [2, 0x6e, 0x30, 4, 0x74, 0x65, 0x73, 0x74, 0]
        var message: [UInt8] = [0, 0, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0] + name + [0, 1, 0, 1]
        message += [0xc0, 12, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 127, 1, 0, 0]
        return message
    }()

    private var needsFlush = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let ended: Bool
        switch frame.payload {
        case .headers(let headers): ended = headers.endStream
        case .data(let data): ended = data.endStream
        default: ended = false
        }
        guard ended else { return }
        var headers = HPACKHeaders()
        headers.reserveCapacity(4)
        headers.add(name: ":status", value: "200")
        headers.add(name: "content-type", value: "application/dns-message")
        headers.add(name: "content-length", value: String(Self.answer.count))
        headers.add(name: "cache-control", value: "max-age=3600")
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .headers(.init(headers: headers)))),
            promise: nil)
        let body = context.channel.allocator.buffer(bytes: Self.answer)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: frame.streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
            promise: nil)
        needsFlush = true
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let port = Int(arguments[1]) else {
    print("usage: H2Ceiling PORT CERTIFICATE.pem KEY.pem")
    exit(64)
}
var tls = TLSConfiguration.makeServerConfiguration(
    certificateChain: try NIOSSLCertificate.fromPEMFile(arguments[2]).map { .certificate($0) },
    privateKey: .privateKey(try NIOSSLPrivateKey(file: arguments[3], format: .pem)))
tls.minimumTLSVersion = .tlsv12
tls.applicationProtocols = ["h2"]
let context = try NIOSSLContext(configuration: tls)
let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .serverChannelOption(.backlog, value: 256)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: context))
            try sync.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: nioDefaultSettings))
            try sync.addHandler(FixedAnswerHandler())
        }
    }
    .bind(host: "127.0.0.1", port: port).get()
print("H2Ceiling: https://127.0.0.1:\(port)/dns-query")
try await channel.closeFuture.get()
