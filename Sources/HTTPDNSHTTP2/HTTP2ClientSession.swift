import CNGHTTP2
import HTTPDNSCore

/// What an ``HTTP2ClientSession`` reports while it reads, called from inside ``HTTP2ClientSession/receive(_:)``.
package protocol HTTP2ClientSessionDelegate: AnyObject {
    /// The server's SETTINGS arrived (the first one tells its stream limit).
    func settingsReceived()
    /// A response arrived whole: its final status, `content-type` and body.
    func responseReceived(stream: Int32, status: Int, contentType: String?, body: [UInt8])
    /// The response's body passed the stream's limit; the stream has been reset.
    func responseTooLarge(stream: Int32)
    /// The stream closed before its response was whole: reset by the server (`code` is its HTTP/2 error code;
    /// `REFUSED_STREAM` also for streams a GOAWAY left out) or ended by nghttp2 for a malformed response.
    func streamFailed(stream: Int32, code: UInt32)
    /// The server sent GOAWAY: streams up to `lastStream` are still answered, no new ones are taken.
    func goAwayReceived(lastStream: Int32, code: UInt32)
}

/// The client side of one HTTP/2 connection on nghttp2: requests in (``submit(method:authority:path:headers:body:limit:)``),
/// bytes out (``pendingOutput(into:)``), bytes in (``receive(_:)``), responses out to the delegate.
///
/// nghttp2 keeps the streams' and the connection's state, HPACK, SETTINGS, PING, flow control (the connection's
/// window is opened once and DATA is given back with WINDOW_UPDATE as it is read) and the server's stream limit:
/// requests beyond it wait in nghttp2's queue until a stream closes.
///
/// Confined to the connection's event loop: not `Sendable`, every call on that loop.
package final class HTTP2ClientSession: HTTP2Session {
    /// What the client announces and keeps.
    package struct Settings: Sendable, Hashable {
        /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window (larger than any accepted answer).
        var initialWindowSize: UInt32
        /// The connection's receive window, opened at the start.
        var connectionWindow: Int32
        /// SETTINGS_MAX_HEADER_LIST_SIZE for responses.
        var maximumHeaderListSize: UInt32

        /// Settings with the given windows and header bound (the defaults are the only place they are written).
        package init(
            initialWindowSize: UInt32 = 65_535, connectionWindow: Int32 = 8 << 20,
            maximumHeaderListSize: UInt32 = 16_384
        ) {
            self.initialWindowSize = initialWindowSize
            self.connectionWindow = connectionWindow
            self.maximumHeaderListSize = maximumHeaderListSize
        }
    }

    /// A stream's request body while it leaves and its response while it arrives.
    private final class Stream {
        let limit: Int
        var body: OutgoingBody
        var status: Int?
        var contentType: String?
        var received: [UInt8] = []
        /// Reported already (too large): nothing more is said of it.
        var reported = false

        init(limit: Int, body: [UInt8]) {
            self.limit = limit
            self.body = OutgoingBody(body)
        }
    }

    private unowned(unsafe) let delegate: any HTTP2ClientSessionDelegate
    private var streams: [Int32: Stream] = [:]
    /// The stream the callbacks asked for last: nghttp2 reports a response's header fields, DATA and end one after
    /// another, so most look-ups are answered here without hashing.
    private var recentID: Int32 = 0
    private var recent: Stream?
    /// Header names and values of the request being submitted, and their nghttp2_nv entries (reused).
    private var fields = HTTP2FieldBlock(bytes: 256, fields: 8)

    /// A session that sends its SETTINGS first (no server push); `delegate` must outlive it (it owns the session).
    package init(settings: Settings, delegate: any HTTP2ClientSessionDelegate) throws {
        self.delegate = delegate
        try super.init(role: .client)
        try submitSettings([
            (NGHTTP2_SETTINGS_ENABLE_PUSH, 0),
            (NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0),
            (NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, settings.initialWindowSize),
            (NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, settings.maximumHeaderListSize),
        ])
        let status = nghttp2_session_set_local_window_size(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, settings.connectionWindow)
        guard status == 0 else { throw HTTP2SessionFailure(code: Int(status)) }
    }

    /// Queues a request and returns its stream ID. `headers` are sent after the pseudo-header fields (names in
    /// lower case); `body`, when given, is sent as DATA; a response body over `limit` bytes resets the stream.
    /// - Throws: ``HTTP2SessionFailure`` when no stream can be opened (stream IDs used up, the session going away).
    package func submit(
        method: String, authority: String, path: (slash: StaticString, base: String, suffix: String),
        headers: [(String, String)], body: [UInt8]?, limit: Int
    ) throws -> Int32 {
        // The block is taken out of the session for the call and put back after (see `HTTP2FieldBlock`).
        var fields = self.fields
        self.fields = HTTP2FieldBlock()
        defer {
            fields.removeAll()
            self.fields = fields
        }
        fields.add(":method", method)
        fields.add(":scheme", "https")
        fields.add(":authority", authority)
        fields.startField(":path")
        fields.appendValue(path.slash)
        fields.appendValue(path.base)
        fields.appendValue(path.suffix)
        fields.endField()
        for (name, value) in headers {
            // content-length is the session's to write (only names of its length are lower-cased to compare).
            if name.utf8.count == 14, name.lowercased() == "content-length" { continue }
            fields.add(name.utf8.contains { (65...90).contains($0) } ? name.lowercased() : name, value)
        }
        fields.add("user-agent", "swift-httpdns")
        if let body {
            fields.startField("content-length")
            fields.appendValue(decimal: UInt64(body.count))
            fields.endField()
        }
        var provider = Self.bodyProvider
        let session = self.session
        let stream = fields.withEntries { entries, count in
            body == nil
                ? nghttp2_submit_request(session, nil, entries, count, nil, nil)
                : nghttp2_submit_request(session, nil, entries, count, &provider, nil)
        }
        guard stream > 0 else { throw HTTP2SessionFailure(code: Int(stream)) }
        streams[stream] = Stream(limit: limit, body: body ?? [])
        return stream
    }

    /// Ends `stream` from this side (RST_STREAM CANCEL); nothing more is reported for it.
    package func cancel(stream: Int32) {
        guard let state = streams[stream] else { return }
        state.reported = true
        reset(stream, code: NGHTTP2_CANCEL)
    }

    // MARK: Events (from nghttp2, inside receive or pendingOutput)

    /// The state of `id`, if it is open.
    private func state(of id: Int32) -> Stream? {
        if id == recentID, let recent { return recent }
        let found = streams[id]
        (recentID, recent) = (id, found)
        return found
    }

    override func field(_ stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard let state = state(of: stream) else { return true }
        if name.equals(":status") {
            // Informational answers (1xx) come before the real one; only the final status is kept. nghttp2 has
            // checked that it is three digits.
            let status = value.reduce(0) { $0 * 10 + Int($1 &- UInt8(ascii: "0")) }
            if !(100..<200).contains(status) { state.status = status }
        } else if name.equals("content-type"), state.contentType == nil {
            // The usual answer's type is kept as a constant rather than a new string per response.
            state.contentType =
                value.equals("application/dns-message")
                ? "application/dns-message" : String(decoding: value, as: UTF8.self)
        }
        return true
    }

    override func data(_ stream: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let state = state(of: stream), !state.reported else { return }
        guard state.received.count + bytes.count <= state.limit else {
            state.reported = true
            state.received = []
            reset(stream, code: NGHTTP2_CANCEL)
            delegate.responseTooLarge(stream: stream)
            return
        }
        state.received.append(contentsOf: bytes)
    }

    override func frameReceived(_ stream: Int32, type: UInt8, flags: UInt8, isRequestHead: Bool) {
        if type == UInt8(NGHTTP2_SETTINGS.rawValue) {
            if flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { delegate.settingsReceived() }
            return
        }
        guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
            flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, let state = state(of: stream), !state.reported
        else { return }
        state.reported = true
        let body = state.received
        state.received = []
        delegate.responseReceived(stream: stream, status: state.status ?? 0, contentType: state.contentType, body: body)
    }

    override func goAwayReceived(lastStream: Int32, code: UInt32) {
        delegate.goAwayReceived(lastStream: lastStream, code: code)
    }

    override func readBody(_ stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (
        count: Int, done: Bool
    ) {
        guard let state = state(of: stream) else { return (0, true) }
        return state.body.read(into: buffer, length: length)
    }

    override func closed(_ stream: Int32, code: UInt32) {
        if stream == recentID { (recentID, recent) = (0, nil) }
        guard let state = streams.removeValue(forKey: stream), !state.reported else { return }
        delegate.streamFailed(stream: stream, code: code)
    }

    /// The name of an HTTP/2 error code, for messages.
    package static func errorName(_ code: UInt32) -> String {
        switch code {
        case NGHTTP2_NO_ERROR.rawValue: "NO_ERROR"
        case NGHTTP2_PROTOCOL_ERROR.rawValue: "PROTOCOL_ERROR"
        case NGHTTP2_INTERNAL_ERROR.rawValue: "INTERNAL_ERROR"
        case NGHTTP2_FLOW_CONTROL_ERROR.rawValue: "FLOW_CONTROL_ERROR"
        case NGHTTP2_STREAM_CLOSED.rawValue: "STREAM_CLOSED"
        case NGHTTP2_REFUSED_STREAM.rawValue: "REFUSED_STREAM"
        case NGHTTP2_CANCEL.rawValue: "CANCEL"
        case NGHTTP2_ENHANCE_YOUR_CALM.rawValue: "ENHANCE_YOUR_CALM"
        default: "error \(code)"
        }
    }

    /// The HTTP/2 error code REFUSED_STREAM: the server did not process the stream, so it may be sent again.
    package static let refusedStream = NGHTTP2_REFUSED_STREAM.rawValue
}
