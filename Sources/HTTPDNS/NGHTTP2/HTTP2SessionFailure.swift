import CNGHTTP2

/// The failure of a whole nghttp2 session (client or server): the connection is to be closed.
package struct HTTP2SessionFailure: Error, CustomStringConvertible {
    /// nghttp2's error code.
    package var code: Int
    /// nghttp2's text for it.
    package var description: String { "nghttp2: " + String(cString: nghttp2_strerror(Int32(code))) }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes are exactly `text` (a header name, say).
    func equals(_ text: StaticString) -> Bool {
        count == text.utf8CodeUnitCount
            && elementsEqual(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}
