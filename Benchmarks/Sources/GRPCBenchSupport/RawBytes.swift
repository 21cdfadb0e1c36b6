public import GRPCCore

/// gRPC messages as raw bytes, for the benchmarks' and the lab's services: no code generation, no protobuf.
public struct RawBytes: MessageSerializer, MessageDeserializer {
    /// Creates the serializer.
    public init() {}

    /// The message's bytes as they are.
    public func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }

    /// The received bytes as they are.
    public func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}
