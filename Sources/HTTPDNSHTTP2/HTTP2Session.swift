import CNGHTTP2
package import NIOCore
import HTTPDNSCore

/// What both ends of an HTTP/2 connection on nghttp2 share: the `nghttp2_session`, the byte moves in and out, and
/// the one table of C callbacks, which hands each event to the session's override of the methods below.
///
/// ``HTTP2ClientSession`` (the DoH client) and ``HTTP2ServerSession`` (`hostsctl serve`) subclass it and override
/// the events they act on; the others do nothing here. The callbacks run only inside ``receive(_:)`` and
/// ``pendingOutput(into:)``, on the connection's event loop.
///
/// Confined to the connection's event loop: not `Sendable`, every call on that loop.
package class HTTP2Session {
    /// nghttp2's session; this object is its user data.
    let session: OpaquePointer

    /// Creates the client or server session with the shared callbacks and makes `self` its user data (the
    /// subclass's properties are set by then; no callback runs before the first ``receive(_:)`` or
    /// ``pendingOutput(into:)``).
    /// - Throws: ``HTTP2SessionFailure`` when nghttp2 cannot create it.
    init(role: Role) throws {
        var created: OpaquePointer?
        let status =
            switch role {
            case .client: nghttp2_session_client_new2(&created, HTTP2Callbacks.shared.pointer, nil, nil)
            case .server(let options):
                nghttp2_session_server_new2(&created, HTTP2Callbacks.shared.pointer, nil, options.pointer)
            }
        guard status == 0, let created else { throw HTTP2SessionFailure(code: Int(status)) }
        session = created
        nghttp2_session_set_user_data(session, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        nghttp2_session_del(session)
    }

    /// Which end of the connection a session is.
    enum Role {
        /// Sends the connection preface and opens streams.
        case client
        /// Answers streams, with the server's protections.
        case server(HTTP2SessionOptions)
    }

    /// Queues a SETTINGS frame with `entries`.
    /// - Throws: ``HTTP2SessionFailure`` when nghttp2 refuses them.
    func submitSettings(_ entries: [(id: nghttp2_settings_id, value: UInt32)]) throws {
        var settings = entries.map { nghttp2_settings_entry(settings_id: Int32($0.id.rawValue), value: $0.value) }
        let status = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard status == 0 else { throw HTTP2SessionFailure(code: Int(status)) }
    }

    /// Queues RST_STREAM for `stream` with the HTTP/2 error `code`.
    func reset(_ stream: Int32, code: nghttp2_error_code) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    /// Hands `bytes` from the peer to nghttp2; the events they carry are called meanwhile.
    /// - Throws: ``HTTP2SessionFailure`` when the session cannot go on (a protocol error or a flood by the peer):
    ///   send what ``pendingOutput(into:)`` still has (a GOAWAY, for a server) and close the connection.
    package func receive(_ bytes: ByteBuffer) throws {
        let read = bytes.withUnsafeReadableBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        if read < 0 { throw HTTP2SessionFailure(code: read) }
    }

    /// Appends every frame nghttp2 has ready (the preface and SETTINGS, HEADERS and DATA, WINDOW_UPDATE,
    /// acknowledgements, RST_STREAM, GOAWAY) to `buffer`.
    /// - Throws: ``HTTP2SessionFailure`` when the session failed.
    package func pendingOutput(into buffer: inout ByteBuffer) throws {
        while true {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 { throw HTTP2SessionFailure(code: count) }
            guard count > 0, let chunk else { return }
            buffer.writeBytes(UnsafeRawBufferPointer(start: chunk, count: count))
        }
    }

    /// A data provider whose reads come to ``readBody(_:into:length:)``, for `nghttp2_submit_request` and
    /// `nghttp2_submit_response`.
    static var bodyProvider: nghttp2_data_provider {
        nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Callbacks.readBody)
    }

    // MARK: Events (from nghttp2, inside receive or pendingOutput); each subclass overrides those it acts on

    /// A HEADERS frame starts on `stream`; `isRequest`: it opens a request (not trailers or a response).
    func beginHeaders(_ stream: Int32, isRequest: Bool) {}

    /// One header field of `stream`. `false` resets the stream (RST_STREAM INTERNAL_ERROR); the connection goes on.
    func field(_ stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool { true }

    /// A piece of `stream`'s DATA.
    func data(_ stream: Int32, _ bytes: UnsafeRawBufferPointer) {}

    /// A whole frame other than GOAWAY arrived; `isRequestHead`: HEADERS opening a request.
    func frameReceived(_ stream: Int32, type: UInt8, flags: UInt8, isRequestHead: Bool) {}

    /// The peer sent GOAWAY: streams up to `lastStream` are still processed.
    func goAwayReceived(lastStream: Int32, code: UInt32) {}

    /// A frame went out.
    func frameSent(_ stream: Int32, type: UInt8, flags: UInt8) {}

    /// `stream` closed, with the HTTP/2 error `code` (`NO_ERROR` when it ended normally).
    func closed(_ stream: Int32, code: UInt32) {}

    /// Copies up to `length` bytes of `stream`'s outgoing body into `buffer`; `done` with the last byte.
    func readBody(_ stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (count: Int, done: Bool) {
        (0, true)
    }

    /// nghttp2 found the peer at fault (a protocol error, a flood) and said why.
    func sessionError(_ message: String) {}
}

/// The callbacks every session shares: C functions that find their session through the user data pointer and call
/// its override of the event.
private struct HTTP2Callbacks: @unchecked Sendable {
    /// `@unchecked Sendable`: written once while the global initialises, then only read (nghttp2 copies the
    /// callbacks into each session it creates).
    let pointer: OpaquePointer

    static let shared = HTTP2Callbacks()

    private init() {
        var created: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&created) == 0 && created != nil, "nghttp2 callbacks")
        pointer = created!
        nghttp2_session_callbacks_set_on_begin_headers_callback(pointer) { _, frame, user in
            guard let frame else { return 0 }
            let isRequest = frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
            HTTP2Callbacks.withSession(user) { $0.beginHeaders(frame.pointee.hd.stream_id, isRequest: isRequest) }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(pointer) {
            _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let name, let value else { return 0 }
            let accepted = HTTP2Callbacks.withSession(user) {
                $0.field(
                    frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                    value: UnsafeRawBufferPointer(start: value, count: valueLength))
            }
            return accepted ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(pointer) { _, _, stream, data, length, user in
            guard let data else { return 0 }
            HTTP2Callbacks.withSession(user) { $0.data(stream, UnsafeRawBufferPointer(start: data, count: length)) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(pointer) { _, frame, user in
            guard let frame else { return 0 }
            let header = frame.pointee.hd
            HTTP2Callbacks.withSession(user) { session in
                switch header.type {
                case UInt8(NGHTTP2_GOAWAY.rawValue):
                    session.goAwayReceived(
                        lastStream: frame.pointee.goaway.last_stream_id, code: frame.pointee.goaway.error_code)
                case UInt8(NGHTTP2_HEADERS.rawValue):
                    session.frameReceived(
                        header.stream_id, type: header.type, flags: header.flags,
                        isRequestHead: frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST)
                default:
                    session.frameReceived(
                        header.stream_id, type: header.type, flags: header.flags, isRequestHead: false)
                }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(pointer) { _, frame, user in
            guard let frame else { return 0 }
            let header = frame.pointee.hd
            HTTP2Callbacks.withSession(user) { $0.frameSent(header.stream_id, type: header.type, flags: header.flags) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(pointer) { _, stream, code, user in
            HTTP2Callbacks.withSession(user) { $0.closed(stream, code: code) }
            return 0
        }
        nghttp2_session_callbacks_set_error_callback2(pointer) { _, code, message, length, user in
            guard let message else { return 0 }
            let text = message.withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
            HTTP2Callbacks.withSession(user) { $0.sessionError("\(text) (\(code))") }
            return 0
        }
    }

    /// The data provider of every outgoing body: copies the stream's body into nghttp2's frame buffer.
    static let readBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, user in
        guard let buffer, let flags else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let (count, done) = HTTP2Callbacks.withSession(user) { $0.readBody(stream, into: buffer, length: length) }
        if done { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }

    /// Runs `body` with the session behind the user data pointer. The session outlives every callback (it calls
    /// nghttp2 and owns it), so it is borrowed without a retain and release per callback.
    private static func withSession<Result>(_ user: UnsafeMutableRawPointer?, _ body: (HTTP2Session) -> Result)
        -> Result
    {
        Unmanaged<HTTP2Session>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }
}
