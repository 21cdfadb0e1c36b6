import CNGHTTP2
import HTTPDNSCore

/// The failure of a whole nghttp2 session (client or server): the connection is to be closed.
struct HTTP2SessionFailure: Error, CustomStringConvertible {
    /// nghttp2's error code.
    var code: Int
    /// nghttp2's text for it.
    var description: String { "nghttp2: " + String(cString: nghttp2_strerror(Int32(code))) }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes are exactly `text` (a header name, say).
    func equals(_ text: StaticString) -> Bool {
        // An index loop over the two pointers: the generic `elementsEqual` walked both sides through iterators,
        // about 1 % of a DoH lookup's CPU.
        guard count == text.utf8CodeUnitCount else { return false }
        let expected = text.utf8Start
        for index in 0..<count where self[index] != expected[index] { return false }
        return true
    }
}

/// A body on its way out through nghttp2's data provider, read in frame-sized pieces.
struct OutgoingBody {
    private var bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8] = []) {
        self.bytes = bytes
    }

    /// Copies up to `length` bytes into `buffer`; `done` once the last byte is out (the bytes are then released).
    mutating func read(into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (count: Int, done: Bool) {
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

/// A header block on its way to nghttp2: names and values written one after another into one byte buffer, with
/// their spans, and turned into `nghttp2_nv` entries at submission (nghttp2 copies them before it returns).
///
/// A session keeps one and reuses its capacity. It takes the block out of its property for a submission and puts it
/// back after, so the appends work on a local: checked for exclusive access when compiled, not once per append at
/// run time.
struct HTTP2FieldBlock {
    private var bytes: [UInt8] = []
    private var spans: [(name: Range<Int>, value: Range<Int>)] = []
    private var entries: [nghttp2_nv] = []
    private var valueStart = 0

    /// An empty block that allocates nothing.
    init() {}

    /// An empty block with room for `bytes` bytes of names and values and `fields` fields.
    init(bytes: Int, fields: Int) {
        self.bytes.reserveCapacity(bytes)
        spans.reserveCapacity(fields)
        entries.reserveCapacity(fields)
    }

    /// Starts a field named `name` (lower case); its value is appended next, then ``endField()``.
    mutating func startField(_ name: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        valueStart = bytes.count
    }

    /// Starts a field named `name` (already lower case).
    mutating func startField(_ name: some StringProtocol) {
        bytes.append(contentsOf: name.utf8)
        valueStart = bytes.count
    }

    /// Appends `text` to the value of the field started last.
    mutating func appendValue(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends `text` to the value of the field started last.
    mutating func appendValue(_ text: some StringProtocol) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Appends `value` in decimal digits, without making a string.
    mutating func appendValue(decimal value: UInt64) {
        var divisor: UInt64 = 1
        while divisor <= value / 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Ends the field started last.
    mutating func endField() {
        let nameStart = spans.last?.value.upperBound ?? 0
        spans.append((nameStart..<valueStart, valueStart..<bytes.count))
    }

    /// One field: `name`, then `value`.
    mutating func add(_ name: some StringProtocol, _ value: some StringProtocol) {
        startField(name)
        appendValue(value)
        endField()
    }

    /// Calls `body` with the block's entries (pointing into the block's bytes, valid only during the call).
    mutating func withEntries<Result>(_ body: (UnsafePointer<nghttp2_nv>?, Int) -> Result) -> Result {
        entries.removeAll(keepingCapacity: true)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            for (name, value) in spans {
                entries.append(
                    nghttp2_nv(
                        name: base + name.lowerBound, value: base + value.lowerBound, namelen: name.count,
                        valuelen: value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
            }
            return entries.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
        }
    }

    /// Empties the block, keeping its capacity.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
    }
}
