/// A validated DNS host name, normalised to lower case and without a trailing dot.
///
/// Validation follows the limits of the DNS and the host name rules that resolvers apply in practice:
/// at most 253 bytes, labels of 1 to 63 bytes, and only ASCII letters, digits, `-` and `_`.
/// Internationalised names must be converted to their `xn--` (punycode) form first.
public struct HostName: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The normalised name, e.g. `api.example.com`.
    package let name: String

    /// Validates and normalises `text`.
    ///
    /// One trailing dot (the fully qualified form) is accepted and removed.
    /// - Throws: ``HTTPDNSError`` with code ``HTTPDNSError/Code/badName`` and a message that says what is wrong.
    public init(_ text: some StringProtocol) throws(HTTPDNSError) {
        var text = String(text)
        let result = text.withUTF8 { bytes in Result { () throws(HTTPDNSError) in try HostName(utf8: bytes) } }
        self = try result.get()
    }

    /// Validates and normalises raw bytes; the only allocation is the resulting string (none up to 15 bytes).
    package init(utf8 input: UnsafeBufferPointer<UInt8>) throws(HTTPDNSError) {
        var bytes = input
        if bytes.last == UInt8(ascii: ".") { bytes = UnsafeBufferPointer(rebasing: bytes.dropLast()) }
        func fail(_ reason: String) -> HTTPDNSError {
            let text = HostName.printable(String(decoding: input, as: UTF8.self))
            return HTTPDNSError(code: .badName, message: "invalid host name: \(reason)", host: text)
        }
        guard !bytes.isEmpty else { throw fail("the name is empty") }
        guard bytes.count <= 253 else { throw fail("the name is \(bytes.count) bytes long; at most 253 are allowed") }
        var labelLength = 0
        for (offset, byte) in bytes.enumerated() {
            switch byte {
            case UInt8(ascii: "."):
                guard labelLength > 0 else { throw fail("empty label at byte \(offset)") }
                labelLength = 0
                continue
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                break
            case 0..<0x20, 0x7F:
                throw fail("control character 0x\(String(byte, radix: 16)) at byte \(offset)")
            case 0x80...:
                throw fail("non-ASCII byte at offset \(offset); convert internationalised names to punycode")
            default:
                throw fail("character '\(Character(Unicode.Scalar(byte)))' at byte \(offset) is not allowed")
            }
            labelLength += 1
            guard labelLength <= 63 else { throw fail("a label is longer than 63 bytes (at byte \(offset))") }
        }
        guard labelLength > 0 else { throw fail("the name ends with an empty label") }
        self.name = String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for (index, byte) in bytes.enumerated() {
                buffer[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
            }
            return bytes.count
        }
    }

    /// The normalised name.
    public var description: String { name }

    /// Whether this is `localhost` or a name under `.localhost` (RFC 6761).
    package var isLocalhost: Bool { name == "localhost" || name.hasSuffix(".localhost") }

    /// Orders names by their normalised text.
    public static func < (lhs: HostName, rhs: HostName) -> Bool { lhs.name < rhs.name }

    /// `text` with only the ASCII letters A-Z lower-cased: DNS names compare case-insensitively in ASCII only
    /// (RFC 4343), and Unicode case mapping would turn other characters into ASCII (U+212A KELVIN SIGN into `k`).
    package static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0 }, as: UTF8.self)
    }

    /// A form of untrusted text that is safe to put in a message: control characters escaped, length capped.
    package static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(300) {
            // C0 and C1 controls (ESC and CSI start terminal sequences) and the bidirectional overrides, which can
            // make a terminal or a page show text in another order than it has.
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || (0x202A...0x202E).contains(scalar.value)
                || (0x2066...0x2069).contains(scalar.value)
            {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > 300 ? out + "…" : out
    }
}
