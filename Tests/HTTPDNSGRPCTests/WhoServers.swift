import GRPCCore
import GRPCNIOTransportHTTP2Posix
import TestSupport

/// Messages as raw bytes: the tests need no generated code, only a real gRPC exchange.
struct BytesCoder: MessageSerializer, MessageDeserializer {
    typealias Message = [UInt8]

    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }

    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}

/// One unary method that answers the name of the server it reached, so a test sees where each call went.
struct WhoService: RegistrableRPCService {
    static let method = MethodDescriptor(fullyQualifiedService: "httpdns.test.Who", method: "Name")
    let name: String

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let name = name
        router.registerHandler(forMethod: Self.method, deserializer: BytesCoder(), serializer: BytesCoder()) {
            request, _ in
            for try await _ in request.messages {}
            return StreamingServerResponse(single: ServerResponse(message: Array(name.utf8)))
        }
    }
}

/// A grpc-swift server on one loopback address, answering ``WhoService`` with its name.
final class WhoServer: Sendable {
    let name: String
    let ip: String
    let port: Int
    private let server: GRPCServer<HTTP2ServerTransport.Posix>
    private let serving: Task<Void, any Error>

    private init(
        name: String, ip: String, port: Int, server: GRPCServer<HTTP2ServerTransport.Posix>,
        serving: Task<Void, any Error>
    ) {
        self.name = name
        self.ip = ip
        self.port = port
        self.server = server
        self.serving = serving
    }

    /// Starts a server on `ip:port` (port 0 picks one), with TLS when `certificate` is given.
    static func start(name: String, ip: String, port: Int = 0, certificate: TestCertificates.Leaf? = nil) async throws
        -> WhoServer
    {
        let security: HTTP2ServerTransport.Posix.TransportSecurity =
            certificate.map {
                .tls(
                    certificateChain: [.file(path: $0.certificatePath, format: .pem)],
                    privateKey: .file(path: $0.keyPath, format: .pem))
            } ?? .plaintext
        let transport = HTTP2ServerTransport.Posix(
            address: .ipv4(host: ip, port: port), transportSecurity: security)
        let server = GRPCServer(transport: transport, services: [WhoService(name: name)])
        let serving = Task { try await server.serve() }
        let bound = try await transport.listeningAddress
        guard let ipv4 = bound.ipv4 else { throw TestServerError("the server bound \(bound)") }
        return WhoServer(name: name, ip: ip, port: ipv4.port, server: server, serving: serving)
    }

    /// Servers named after their addresses' last digits, all on one port (free on every address).
    static func start(_ ips: [String], certificate: TestCertificates.Leaf? = nil) async throws -> [WhoServer] {
        for _ in 0..<5 {
            var servers: [WhoServer] = []
            do {
                let first = try await start(name: name(of: ips[0]), ip: ips[0], certificate: certificate)
                servers.append(first)
                for ip in ips.dropFirst() {
                    servers.append(
                        try await start(name: name(of: ip), ip: ip, port: first.port, certificate: certificate))
                }
                return servers
            } catch {
                for server in servers { await server.stop() }
            }
        }
        throw TestServerError("no port was free on every one of \(ips)")
    }

    static func name(of ip: String) -> String { String(ip.split(separator: ".").last ?? "") }

    /// Dies: the serving task is cancelled, which closes the listener and every connection at once.
    func kill() async {
        serving.cancel()
        _ = try? await serving.value
    }

    /// Stops accepting and closes the connections once their calls end.
    func stop() async {
        server.beginGracefulShutdown()
        _ = try? await serving.value
    }
}

/// One call to ``WhoService``: the name of the server that answered.
func who(
    _ client: GRPCClient<some ClientTransport>, timeout: Duration = .seconds(10), waitForReady: Bool? = nil
) async throws -> String {
    var options = CallOptions.defaults
    options.timeout = timeout
    options.waitForReady = waitForReady
    return try await client.unary(
        request: ClientRequest(message: []), descriptor: WhoService.method, serializer: BytesCoder(),
        deserializer: BytesCoder(), options: options
    ) { response in
        String(decoding: try response.message, as: UTF8.self)
    }
}
