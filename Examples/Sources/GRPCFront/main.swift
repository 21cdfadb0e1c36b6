// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
// Package.swift: .product(name: "HTTPDNSGRPC", package: "swift-httpdns"),
//                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport")
import GRPCCore
import GRPCNIOTransportHTTP2
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSGRPC

let resolver = try HostResolver(configuration: SettingsFile.load(path: "Config/hostsctl.json").get().resolver)

// The one line: api.example.com's addresses come from the resolver, fastest first, pushed again when they change;
// TLS still checks api.example.com. Every connect gRPC makes is scored for all the resolver's users.
try await withGRPCClient(
    transport: .httpdns(host: "api.example.com", port: 443, resolver: resolver, transportSecurity: .tls)
) { client in
    try await callTheService(client)  // e.g. `Echo_Echo.Client(wrapping: client)`, generated as usual
}
await resolver.shutdown()

/// What an application does with its client: here, one unary call with the message as raw bytes.
func callTheService(_ client: GRPCClient<some ClientTransport>) async throws {
    let echo = MethodDescriptor(fullyQualifiedService: "echo.Echo", method: "Get")
    let reply = try await client.unary(
        request: ClientRequest(message: Array("hello".utf8)), descriptor: echo, serializer: RawBytes(),
        deserializer: RawBytes(), options: .defaults
    ) { response in try response.message }
    print(String(decoding: reply, as: UTF8.self))
}

/// Messages as they are on the wire; generated code brings its own serializers.
struct RawBytes: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}
