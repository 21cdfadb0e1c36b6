package import NIOCore

/// The two-byte length framing of DNS over TCP and over TLS (RFC 1035 §4.2.2, RFC 7766 §8): bytes in as they
/// arrive, whole messages out.
///
/// Only what was not taken yet is kept: the messages still to answer and the start of the next one. Bytes already
/// taken are dropped before more are stored, so a connection costs at most what it has in flight (at most one
/// message, 65,537 bytes, plus one read), never what it sent before. A client whose writes always end inside a message
/// would otherwise make the buffer keep every byte it ever sent.
package struct DNSStreamFramer {
    /// What comes next on the stream.
    package enum Next: Equatable {
        /// A whole message, without its length.
        case message([UInt8])
        /// Not a whole message yet.
        case needMore
        /// A length too short for a DNS header: nothing sensible can follow on this stream.
        case invalid
    }

    private var received: ByteBuffer?

    /// An empty framer.
    package init() {}

    /// The bytes held: the messages not taken yet and the start of the next one.
    package var heldBytes: Int { received?.readableBytes ?? 0 }

    /// The bytes of storage held (what the connection costs in memory).
    package var storageBytes: Int { received?.capacity ?? 0 }

    /// Adds bytes as they arrived.
    package mutating func append(_ bytes: inout ByteBuffer) {
        guard var buffer = received else {
            received = bytes
            return
        }
        // Out of the property first, so the buffer is not shared and compacts in place.
        received = nil
        buffer.discardReadBytes()
        buffer.writeBuffer(&bytes)
        received = buffer
    }

    /// Adds bytes as they arrived.
    package mutating func append(_ bytes: [UInt8]) {
        var buffer = ByteBuffer(bytes: bytes)
        append(&buffer)
    }

    /// Takes the next whole message, if there is one.
    package mutating func next() -> Next {
        guard var buffer = received, let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self) else {
            return .needMore
        }
        guard length >= 12 else { return .invalid }
        received = nil
        guard let message = Self.takeMessage(from: &buffer) else {
            received = buffer
            return .needMore
        }
        received = buffer.readableBytes > 0 ? buffer : nil
        return .message(Array(message.readableBytesView))
    }

    /// The next whole message at the start of `buffer`, taken off it without its length; `nil` (and `buffer` as it
    /// was) when it has not all arrived. The one reader of the framing, for the server's streams and the client's.
    package static func takeMessage(from buffer: inout ByteBuffer) -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt16.self),
            buffer.readableBytes >= 2 + Int(length)
        else { return nil }
        buffer.moveReaderIndex(forwardBy: 2)
        return buffer.readSlice(length: Int(length))
    }

    /// Writes `message` into `buffer` after its two-byte length, as a stream carries it.
    package static func write(_ message: [UInt8], into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt16(message.count))
        buffer.writeBytes(message)
    }
}
