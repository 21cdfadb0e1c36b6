import NIOCore

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
    mutating func append(_ bytes: inout ByteBuffer) {
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
        guard buffer.readableBytes >= 2 + Int(length) else { return .needMore }
        received = nil
        buffer.moveReaderIndex(forwardBy: 2)
        let message = buffer.readBytes(length: Int(length)) ?? []
        received = buffer.readableBytes > 0 ? buffer : nil
        return .message(message)
    }
}
