/// A validated DNS host name, normalised to lower case and without a trailing dot.
///
/// Validation follows the limits of the DNS and the host name rules that resolvers apply in practice:
/// at most 253 bytes, labels of 1 to 63 bytes, and only ASCII letters, digits, `-` and `_`.
/// Internationalised names must be converted to their `xn--` (punycode) form first.
public struct HostName: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The normalised name, e.g. `api.example.com`.
    public let name: String

    /// Validates and normalises `text`.
    ///
    /// One trailing dot (the fully qualified form) is accepted and removed.
    /// - Throws: ``DNSError`` with code ``DNSError/Code/badName`` and a message that says what is wrong.
    public init(_ text: some StringProtocol) throws(DNSError) {
        let text = String(text)
        var utf8 = Array(text.utf8)
        if utf8.last == UInt8(ascii: ".") { utf8.removeLast() }
        func fail(_ reason: String) -> DNSError {
            DNSError(code: .badName, message: "invalid host name: \(reason)", host: HostName.printable(text))
        }
        guard !utf8.isEmpty else { throw fail("the name is empty") }
        guard utf8.count <= 253 else { throw fail("the name is \(utf8.count) bytes long; at most 253 are allowed") }
        var labelLength = 0
        for (offset, byte) in utf8.enumerated() {
            switch byte {
            case UInt8(ascii: "."):
                guard labelLength > 0 else { throw fail("empty label at byte \(offset)") }
                labelLength = 0
                continue
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                break
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                utf8[offset] = byte + 32
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
        self.name = String(decoding: utf8, as: UTF8.self)
    }

    /// The normalised name.
    public var description: String { name }

    /// Whether this is `localhost` or a name under `.localhost` (RFC 6761).
    public var isLocalhost: Bool { name == "localhost" || name.hasSuffix(".localhost") }

    /// Orders names by their normalised text.
    public static func < (lhs: HostName, rhs: HostName) -> Bool { lhs.name < rhs.name }

    /// A form of untrusted text that is safe to put in a message: control characters escaped, length capped.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(300) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > 300 ? out + "…" : out
    }
}
