import CNGHTTP2
import HTTPDNSCore

/// A request as it arrived on one HTTP/2 stream.
package struct HTTP2Request {
    /// `:method`.
    package var method = ""
    /// `:path`: the path and query.
    package var path = "/"
    /// `content-type`, if sent.
    package var contentType: String?
    /// `x-forwarded-for`, every field of it joined by commas, if sent.
    package var forwardedFor: String?
    /// `forwarded` (RFC 7239), every field of it joined by commas, if sent.
    package var forwarded: String?
    /// The body, from every DATA frame.
    package var body: [UInt8] = []
}

/// What an ``HTTP2ServerSession`` reports while it reads, called from inside ``HTTP2ServerSession/receive(_:)``.
/// Answers may be submitted from these calls; nothing is written until ``HTTP2ServerSession/pendingOutput(into:)``.
package protocol HTTP2ServerSessionDelegate: AnyObject {
    /// A request's head arrived and its body is still to come.
    func requestHeadReceived(stream: Int32)
    /// A request arrived whole (END_STREAM on its HEADERS, DATA or trailers).
    func requestReceived(stream: Int32, _ request: HTTP2Request)
    /// A request's body passed the limit; the rest of it is dropped and nothing more is reported for the stream
    /// but its closing. An answer submitted now is followed by RST_STREAM NO_ERROR if the client is still sending.
    func requestBodyTooLarge(stream: Int32)
    /// The stream closed (answered, reset by either side, or refused); `receiving`: its request was not complete.
    func streamClosed(stream: Int32, receiving: Bool)
    /// nghttp2 found the client at fault (a protocol error, a flood) and said why; for the logs.
    func sessionError(_ message: String)
}

/// The server side of one HTTP/2 connection on nghttp2: bytes in (``receive(_:)``), requests out to the delegate,
/// answers in (``respond(stream:status:contentType:maxAge:headers:body:withoutBody:)``), bytes out (``pendingOutput(into:)``).
/// nghttp2 keeps the connection's and streams' state, HPACK, SETTINGS, PING, flow control and its own protections:
/// rapid reset, CONTINUATION and ACK floods, header sizes.
///
/// Flow control bounds what a connection holds: nghttp2's automatic WINDOW_UPDATE is off, and the bytes of a
/// request body are given back to the connection's window only once the body has left the session (its request is
/// complete and handed to the delegate, or its stream closed, or its bytes dropped). So the request bodies held at
/// once on one connection never pass the connection's receive window, the protocol's 65,535 bytes, however many
/// streams send bodies that never end (with automatic updates, 100 such streams held 6.5 MB). This folder is the only one that imports nghttp2 (the server's and the DoH client's sessions); no C type
/// leaves it.
///
/// Confined to the connection's event loop: not `Sendable`, every call on that loop.
package final class HTTP2ServerSession: HTTP2Session {
    /// The SETTINGS the server sends and the limits it keeps.
    package struct Settings: Sendable, Hashable {
        /// SETTINGS_MAX_CONCURRENT_STREAMS: streams the client may have open at once.
        var maximumConcurrentStreams: UInt32 = 100
        /// SETTINGS_MAX_HEADER_LIST_SIZE: a request's header fields (RFC 9113 size: name, value and 32 each); a
        /// larger one has its stream reset.
        var maximumHeaderListSize: Int = 16_384
        /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window.
        var initialWindowSize: UInt32 = 65_535
        /// The largest request body taken; past it ``HTTP2ServerSessionDelegate/requestBodyTooLarge(stream:)``.
        var maximumBodyBytes: Int = 65_535

        /// Settings with these limits.
        package init(maximumBodyBytes: Int = 65_535) {
            self.maximumBodyBytes = maximumBodyBytes
        }
    }

    /// A stream's request while it arrives, and its answer while it leaves (a class: the callbacks update it in place
    /// without copying it out of the table and back).
    ///
    /// Its properties, and the session's table of streams, are not checked for exclusive access at run time
    /// (`@exclusivity(unchecked)`; every header field and frame touches them several times: with the buffers of
    /// `respond`, their checks were about 3 % of `hostsctl serve`'s CPU samples). That is sound because both are
    /// private to the session, which lives on one thread and touches them only inside its own calls and nghttp2's
    /// callbacks from those calls, and no access to them is open across a call that could reach them again: the
    /// delegate is told after the stream is updated, and `OutgoingBody.read` does not call out.
    private final class Stream {
        @exclusivity(unchecked) var request = HTTP2Request()
        @exclusivity(unchecked) var headerBytes = 0
        @exclusivity(unchecked) var receiving = true
        @exclusivity(unchecked) var tooLarge = false
        /// Reset with NO_ERROR once the answer is sent, because the client was still sending.
        @exclusivity(unchecked) var resetAfterAnswer = false
        @exclusivity(unchecked) var answer = OutgoingBody()
    }

    /// Request body bytes received and not yet given back to the connection's window (see the type's comment).
    package private(set) var heldBodyBytes = 0
    /// Header-list bytes (RFC 9113 sizes) of the streams still receiving their request, at most
    /// ``maximumHeldHeaderBytes``: past it a new field resets its stream.
    package private(set) var heldHeaderBytes = 0
    /// The most header-list bytes the streams still receiving may hold together (four whole header lists).
    static let maximumHeldHeaderBytes = 65_536

    private let settings: Settings
    private unowned(unsafe) let delegate: any HTTP2ServerSessionDelegate
    /// The open streams (not checked for exclusive access at run time: see ``Stream``).
    @exclusivity(unchecked) private var streams: [Int32: Stream] = [:]
    /// The header block of the answer being submitted (reused).
    private var fields = HTTP2FieldBlock(bytes: 512, fields: 8)

    /// A session that sends `settings` first; `delegate` must outlive it (it owns the session).
    package init(settings: Settings, options: HTTP2SessionOptions, delegate: any HTTP2ServerSessionDelegate) throws {
        self.settings = settings
        self.delegate = delegate
        try super.init(role: .server(options))
        streams.reserveCapacity(Int(settings.maximumConcurrentStreams))
        try submitSettings([
            (NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings.maximumConcurrentStreams),
            (NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, UInt32(settings.maximumHeaderListSize)),
            (NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, settings.initialWindowSize),
        ])
    }

    /// Whether the session is over: neither side has anything more to say (after a GOAWAY, a fatal error, or
    /// the client's GOAWAY once every stream is done). The connection is then closed.
    package var isFinished: Bool { nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 }

    /// Submits the answer on `stream`: `:status`, `content-type`, `content-length`, `cache-control` with `maxAge`,
    /// then `headers` (names in lower case), then the body unless `withoutBody` (HEAD). Dropped if the stream has
    /// closed. The fields are written into one reused buffer, numbers without making strings.
    package func respond(
        stream: Int32, status: Int, contentType: String, maxAge: UInt32?, headers: [String: String], body: [UInt8],
        withoutBody: Bool
    ) {
        guard let state = streams[stream] else { return }
        // The block is taken out of the session for the call and put back after (see `HTTP2FieldBlock`).
        var fields = self.fields
        self.fields = HTTP2FieldBlock()
        defer {
            fields.removeAll()
            self.fields = fields
        }
        fields.startField(":status")
        fields.appendValue(decimal: UInt64(max(status, 0)))
        fields.endField()
        fields.add("content-type", contentType)
        fields.startField("content-length")
        fields.appendValue(decimal: UInt64(body.count))
        fields.endField()
        if let maxAge {
            fields.startField("cache-control")
            fields.appendValue("max-age=")
            fields.appendValue(decimal: UInt64(maxAge))
            fields.endField()
        }
        if !headers.isEmpty {
            for (field, value) in headers.sorted(by: { $0.key < $1.key }) { fields.add(field.lowercased(), value) }
        }
        let sendsBody = !withoutBody && !body.isEmpty
        if sendsBody {
            state.answer = OutgoingBody(body)
        }
        var provider = Self.bodyProvider
        let session = self.session
        let result = fields.withEntries { entries, count in
            sendsBody
                ? nghttp2_submit_response(session, stream, entries, count, &provider)
                : nghttp2_submit_response(session, stream, entries, count, nil)
        }
        if result != 0 {
            state.answer = OutgoingBody()
            reset(stream, code: NGHTTP2_INTERNAL_ERROR)
        }
    }

    /// Tells the client that no new stream will be taken (GOAWAY NO_ERROR with the last stream seen): the streams
    /// open are answered, then the session is finished.
    package func goAway() {
        nghttp2_submit_goaway(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
            NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    // MARK: Events (from nghttp2, inside receive or pendingOutput)

    override func beginHeaders(_ stream: Int32, isRequest: Bool) {
        if isRequest { streams[stream] = Stream() }
    }

    /// `false` resets the stream: its header list is over the limit, or the connection's streams still receiving
    /// hold ``maximumHeldHeaderBytes`` of header lists already.
    override func field(_ stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard let state = streams[stream] else { return true }
        let size = name.count + value.count + 32
        state.headerBytes += size
        guard state.headerBytes <= settings.maximumHeaderListSize else { return false }
        if state.receiving {
            // HPACK lets a client repeat a large field for a few bytes each: what open streams hold is bounded for
            // the connection, not only per stream.
            heldHeaderBytes += size
            guard heldHeaderBytes <= Self.maximumHeldHeaderBytes else { return false }
        }
        // Trailers (after a body, or once the head is taken) are counted but not kept.
        guard state.receiving, state.request.body.isEmpty else { return true }
        if name.equals(":method") {
            state.request.method = String(decoding: value, as: UTF8.self)
        } else if name.equals(":path") {
            state.request.path = String(decoding: value, as: UTF8.self)
        } else if name.equals("content-type") {
            state.request.contentType = String(decoding: value, as: UTF8.self)
        } else if name.equals("x-forwarded-for") {
            let text = String(decoding: value, as: UTF8.self)
            state.request.forwardedFor = state.request.forwardedFor.map { $0 + "," + text } ?? text
        } else if name.equals("forwarded") {
            let text = String(decoding: value, as: UTF8.self)
            state.request.forwarded = state.request.forwarded.map { $0 + "," + text } ?? text
        }
        return true
    }

    override func data(_ stream: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let state = streams[stream], state.receiving, !state.tooLarge else { return giveBack(bytes.count) }
        guard state.request.body.count + bytes.count <= settings.maximumBodyBytes else {
            state.tooLarge = true
            // The body held so far, and this piece, which was never counted as held.
            giveBack(state.request.body.count)
            nghttp2_session_consume_connection(session, bytes.count)
            state.request.body = []
            state.resetAfterAnswer = true
            delegate.requestBodyTooLarge(stream: stream)
            return
        }
        state.request.body.append(contentsOf: bytes)
        heldBodyBytes += bytes.count
    }

    /// Gives `count` body bytes back to the connection's receive window (they are no longer held): nghttp2 sends
    /// WINDOW_UPDATE once enough are back. The stream's own window is not given back: a request body is taken
    /// whole within it.
    private func giveBack(_ count: Int) {
        guard count > 0 else { return }
        heldBodyBytes = max(heldBodyBytes - count, 0)
        nghttp2_session_consume_connection(session, count)
    }

    /// Gives back every byte `state`'s body holds, and clears it.
    private func release(_ state: Stream) {
        let held = state.request.body.count
        state.request.body = []
        // Bytes dropped earlier (past the limit) were given back when they came.
        heldBodyBytes = max(heldBodyBytes - held, 0)
        if held > 0 { nghttp2_session_consume_connection(session, held) }
    }

    override func frameReceived(_ stream: Int32, type: UInt8, flags: UInt8, isRequestHead: Bool) {
        guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue), stream != 0,
            let state = streams[stream], state.receiving
        else { return }
        if flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
            state.receiving = false
            heldHeaderBytes = max(heldHeaderBytes - state.headerBytes, 0)
            state.resetAfterAnswer = false
            guard !state.tooLarge else { return }
            let request = state.request
            state.request = HTTP2Request()
            // The body is the delegate's now: counted against the stream (and the upstream places) from here on.
            if !request.body.isEmpty {
                heldBodyBytes = max(heldBodyBytes - request.body.count, 0)
                nghttp2_session_consume_connection(session, request.body.count)
            }
            delegate.requestReceived(stream: stream, request)
        } else if isRequestHead, type == UInt8(NGHTTP2_HEADERS.rawValue) {
            delegate.requestHeadReceived(stream: stream)
        }
    }

    override func frameSent(_ stream: Int32, type: UInt8, flags: UInt8) {
        if type == UInt8(NGHTTP2_RST_STREAM.rawValue) { return resetSent(stream) }
        guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
            flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, streams[stream]?.resetAfterAnswer == true
        else { return }
        // The answer is out and the client is still sending a body that is not wanted (RFC 9113 §8.1).
        reset(stream, code: NGHTTP2_NO_ERROR)
    }

    /// nghttp2 sent RST_STREAM. A stream it refused before opening it (past SETTINGS_MAX_CONCURRENT_STREAMS, while
    /// the streams it reset itself still wait for their RST_STREAM to go out) is never reported closed: it is
    /// reported here, so that it ends unanswered like the others (a loaded server refused thousands of such streams
    /// uncounted). A stream still known is reported when nghttp2 closes it, right after.
    private func resetSent(_ stream: Int32) {
        guard stream != 0, streams[stream] == nil else { return }
        delegate.streamClosed(stream: stream, receiving: true)
    }

    override func readBody(_ stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (
        count: Int, done: Bool
    ) {
        guard let state = streams[stream] else { return (0, true) }
        return state.answer.read(into: buffer, length: length)
    }

    override func closed(_ stream: Int32, code: UInt32) {
        guard let state = streams.removeValue(forKey: stream) else { return }
        release(state)
        if state.receiving { heldHeaderBytes = max(heldHeaderBytes - state.headerBytes, 0) }
        delegate.streamClosed(stream: stream, receiving: state.receiving && !state.tooLarge)
    }

    override func sessionError(_ message: String) {
        delegate.sessionError(message)
    }
}

/// The nghttp2 options of a server's sessions: the protections, set once per server.
///
/// `@unchecked Sendable`: the option object is written only in `init` and then only read by nghttp2 when a session
/// is created (it copies the values), from any event loop.
package final class HTTP2SessionOptions: @unchecked Sendable {
    let pointer: OpaquePointer

    /// The options every session of a server shares: the client's header blocks bounded (CONTINUATION frames, the
    /// HPACK table kept for answers), at most 1,000 queued SETTINGS/PING acknowledgements, and at most 1,000 resets
    /// at once then 33 a second (rapid reset, CVE-2023-44487) before the connection is closed with GOAWAY. Each
    /// stream's receive window is its SETTINGS value; the connection's is the protocol's 65,535 bytes, given back
    /// only as request bodies leave the session (automatic WINDOW_UPDATE off: see ``HTTP2ServerSession``).
    package init() {
        var created: OpaquePointer?
        precondition(nghttp2_option_new(&created) == 0 && created != nil, "nghttp2 could not allocate its options")
        pointer = created!
        nghttp2_option_set_max_settings(pointer, 32)
        nghttp2_option_set_max_outbound_ack(pointer, 1_000)
        nghttp2_option_set_stream_reset_rate_limit(pointer, 1_000, 33)
        nghttp2_option_set_max_continuations(pointer, 8)
        nghttp2_option_set_max_send_header_block_length(pointer, 16_384)
        nghttp2_option_set_max_deflate_dynamic_table_size(pointer, 4_096)
        nghttp2_option_set_no_auto_window_update(pointer, 1)
    }

    deinit {
        nghttp2_option_del(pointer)
    }
}
