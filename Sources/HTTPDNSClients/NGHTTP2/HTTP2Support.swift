import CNGHTTP2
import NIOCore
import HTTPDNSCore
import HTTPDNSCAres

/// The failure of a whole nghttp2 session (client or server): the connection is to be closed.
package struct HTTP2SessionFailure: Error, CustomStringConvertible {
    /// nghttp2's error code.
    package var code: Int
    /// nghttp2's text for it.
    package var description: String { "nghttp2: " + String(cString: nghttp2_strerror(Int32(code))) }
}

/// The byte moves both sessions make: decrypted bytes into an `nghttp2_session`, its frames out into a buffer.
enum HTTP2SessionIO {
    /// Hands `bytes` to `session`, whose callbacks run meanwhile.
    /// - Throws: ``HTTP2SessionFailure`` when the session cannot go on.
    static func receive(_ bytes: ByteBuffer, into session: OpaquePointer) throws {
        let read = bytes.withUnsafeReadableBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        if read < 0 { throw HTTP2SessionFailure(code: read) }
    }

    /// Appends every frame `session` has ready to `buffer`.
    /// - Throws: ``HTTP2SessionFailure`` when the session failed.
    static func pendingOutput(of session: OpaquePointer, into buffer: inout ByteBuffer) throws {
        while true {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 { throw HTTP2SessionFailure(code: count) }
            guard count > 0, let chunk else { return }
            buffer.writeBytes(UnsafeRawBufferPointer(start: chunk, count: count))
        }
    }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes are exactly `text` (a header name, say).
    package func equals(_ text: StaticString) -> Bool {
        // An index loop over the two pointers: the generic `elementsEqual` walked both sides through iterators,
        // about 1 % of a DoH lookup's CPU.
        guard count == text.utf8CodeUnitCount else { return false }
        let expected = text.utf8Start
        for index in 0..<count where self[index] != expected[index] { return false }
        return true
    }
}

/// A body on its way out through nghttp2's data provider, read in frame-sized pieces.
package struct OutgoingBody {
    private var bytes: [UInt8]
    private var offset = 0

    package init(_ bytes: [UInt8] = []) {
        self.bytes = bytes
    }

    /// Copies up to `length` bytes into `buffer`; `done` once the last byte is out (the bytes are then released).
    package mutating func read(into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (count: Int, done: Bool) {
        let offset = self.offset
        let count = bytes.withUnsafeBufferPointer { bytes in
            let count = min(length, bytes.count - offset)
            if count > 0 { buffer.update(from: bytes.baseAddress! + offset, count: count) }
            return count
        }
        self.offset += count
        let done = self.offset == bytes.count
        if done { bytes = [] }
        return (count, done)
    }
}
