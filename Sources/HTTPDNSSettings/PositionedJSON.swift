import HTTPDNSCore

/// A JSON value with the line and column where it starts, so settings errors can point at the exact place.
///
/// swift-configuration reads JSON without positions and skips keys it is not asked for; this small parser
/// (RFC 8259, depth-limited) lets `config check` report unknown keys and wrong types as `file:line:column`.
/// One extension: `//` starts a comment that runs to the end of the line, so the shipped settings file can
/// explain itself.
struct PositionedJSON: Sendable {
    /// A position in the text: 1-based line and byte column.
    struct Position: Sendable, Hashable {
        var line: Int
        var column: Int
    }

    indirect enum Value: Sendable {
        case object([(key: String, keyPosition: Position, value: PositionedJSON)])
        case array([PositionedJSON])
        case string(String)
        case number(Double, isInteger: Bool)
        case bool(Bool)
        case null

        /// The JSON type's name for messages.
        var typeName: String {
            switch self {
            case .object: "an object"
            case .array: "an array"
            case .string: "a string"
            case .number(_, let isInteger): isInteger ? "an integer" : "a number"
            case .bool: "a boolean"
            case .null: "null"
            }
        }
    }

    var value: Value
    var position: Position

    /// A syntax error with its position.
    struct SyntaxError: Error, Sendable {
        var message: String
        var position: Position
    }

    /// The deepest nesting accepted.
    static let maximumDepth = 64

    /// Parses a whole document.
    static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> PositionedJSON {
        var parser = Parser(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3; parser.lineStart = 3 }
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected text after the JSON value") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        var line = 1
        var lineStart = 0

        var position: Position { Position(line: line, column: index - lineStart + 1) }

        func error(_ message: String) -> SyntaxError { SyntaxError(message: message, position: position) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                    index += 1
                case UInt8(ascii: "\n"):
                    index += 1
                    line += 1
                    lineStart = index
                case UInt8(ascii: "/") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "/"):
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { index += 1 }
                default:
                    return
                }
            }
        }

        mutating func parseValue(depth: Int) throws(SyntaxError) -> PositionedJSON {
            guard depth <= PositionedJSON.maximumDepth else {
                throw error("nesting deeper than \(PositionedJSON.maximumDepth) levels")
            }
            guard index < bytes.count else { throw error("unexpected end of file; a value was expected") }
            let start = position
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [(key: String, keyPosition: Position, value: PositionedJSON)] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return PositionedJSON(value: .object(members), position: start)
                }
                while true {
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                        throw error("a key in double quotes was expected")
                    }
                    let keyPosition = position
                    let key = try parseString()
                    if members.contains(where: { $0.key == key }) {
                        throw SyntaxError(message: "duplicate key '\(HostName.printable(key))'", position: keyPosition)
                    }
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                        throw error("':' was expected after the key")
                    }
                    index += 1
                    skipWhitespace()
                    members.append((key, keyPosition, try parseValue(depth: depth + 1)))
                    skipWhitespace()
                    guard index < bytes.count else { throw error("unexpected end of file in an object") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "}") { index += 1; break }
                    throw error("',' or '}' was expected")
                }
                return PositionedJSON(value: .object(members), position: start)
            case UInt8(ascii: "["):
                index += 1
                var elements: [PositionedJSON] = []
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return PositionedJSON(value: .array(elements), position: start)
                }
                while true {
                    skipWhitespace()
                    elements.append(try parseValue(depth: depth + 1))
                    skipWhitespace()
                    guard index < bytes.count else { throw error("unexpected end of file in an array") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    if bytes[index] == UInt8(ascii: "]") { index += 1; break }
                    throw error("',' or ']' was expected")
                }
                return PositionedJSON(value: .array(elements), position: start)
            case UInt8(ascii: "\""):
                return PositionedJSON(value: .string(try parseString()), position: start)
            case UInt8(ascii: "t"):
                try literal("true")
                return PositionedJSON(value: .bool(true), position: start)
            case UInt8(ascii: "f"):
                try literal("false")
                return PositionedJSON(value: .bool(false), position: start)
            case UInt8(ascii: "n"):
                try literal("null")
                return PositionedJSON(value: .null, position: start)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try parseNumber(start: start)
            default:
                throw error("a JSON value was expected")
            }
        }

        mutating func literal(_ word: String) throws(SyntaxError) {
            let utf8 = Array(word.utf8)
            guard bytes.count - index >= utf8.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
                throw error("a JSON value was expected")
            }
            index += utf8.count
        }

        mutating func parseNumber(start: Position) throws(SyntaxError) -> PositionedJSON {
            let begin = index
            var isInteger = true
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            func digits() -> Int {
                let from = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                return index - from
            }
            let integerDigits = digits()
            guard integerDigits > 0 else { throw error("a digit was expected") }
            if integerDigits > 1, bytes[index - integerDigits] == UInt8(ascii: "0") {
                throw error("numbers must not have leading zeros")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                guard digits() > 0 else { throw error("a digit was expected after '.'") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard digits() > 0 else { throw error("a digit was expected in the exponent") }
            }
            let text = String(decoding: bytes[begin..<index], as: UTF8.self)
            guard let number = Double(text), number.isFinite else {
                throw SyntaxError(message: "number out of range", position: start)
            }
            if isInteger, Int(exactly: number) == nil { isInteger = false }
            return PositionedJSON(value: .number(number, isInteger: isInteger), position: start)
        }

        mutating func parseString() throws(SyntaxError) -> String {
            index += 1  // opening quote
            var out: [UInt8] = []
            while true {
                guard index < bytes.count else { throw error("unterminated string") }
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    guard let text = String(validating: out, as: UTF8.self) else {
                        throw error("the string is not valid UTF-8")
                    }
                    return text
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw error("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(8)
                    case UInt8(ascii: "f"): out.append(12)
                    case UInt8(ascii: "n"): out.append(10)
                    case UInt8(ascii: "r"): out.append(13)
                    case UInt8(ascii: "t"): out.append(9)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else {
                                throw error("a lone surrogate in \\u escape")
                            }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw error("an invalid surrogate pair") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw error("an invalid \\u escape") }
                        out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default:
                        throw error("an invalid escape sequence")
                    }
                case 0..<0x20:
                    throw error("a control character inside a string")
                default:
                    out.append(byte)
                    index += 1
                }
            }
        }

        mutating func hex4() throws(SyntaxError) -> UInt32 {
            guard bytes.count - index >= 4 else { throw error("a \\u escape needs four hex digits") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw error("a \\u escape needs four hex digits")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }
    }
}
