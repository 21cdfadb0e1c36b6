import HTTPDNS

/// A JSON value that keeps object keys in the order they were written, for stable CLI output.
enum JSONValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(nilLiteral: ()) { self = .null }

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        lhs.serialized(pretty: false) == rhs.serialized(pretty: false)
    }

    /// The JSON text; `pretty` indents by two spaces.
    func serialized(pretty: Bool = true) -> String {
        var out = ""
        write(into: &out, pretty: pretty, depth: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, depth: Int) {
        let newline = pretty ? "\n" + String(repeating: "  ", count: depth + 1) : ""
        let close = pretty ? "\n" + String(repeating: "  ", count: depth) : ""
        switch self {
        case .null:
            out += "null"
        case .bool(let value):
            out += value ? "true" : "false"
        case .number(let value):
            out += Self.format(value)
        case .string(let value):
            JSONString.quote(value, into: &out)
        case .array(let values):
            guard !values.isEmpty else { out += "[]"; return }
            out += "["
            for (index, value) in values.enumerated() {
                out += (index == 0 ? "" : ",") + newline
                value.write(into: &out, pretty: pretty, depth: depth + 1)
            }
            out += close + "]"
        case .object(let members):
            guard !members.isEmpty else { out += "{}"; return }
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                out += (index == 0 ? "" : ",") + newline
                JSONString.quote(key, into: &out)
                out += pretty ? ": " : ":"
                value.write(into: &out, pretty: pretty, depth: depth + 1)
            }
            out += close + "}"
        }
    }

    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
