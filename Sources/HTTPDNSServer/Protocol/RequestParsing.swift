/// A request target split into its path and its decoded query parameters, in one pass over the bytes (this runs
/// for every request).
struct RequestTarget {
    /// The path, without the query.
    var path: Substring
    /// The raw query, after `?` (empty without one).
    private var rawQuery: Substring

    init(_ target: String) {
        if let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            path = target[..<mark]
            rawQuery = target[target.utf8.index(after: mark)...]
        } else {
            path = Substring(target)
            rawQuery = ""
        }
    }

    /// The decoded query parameters; the first value of each name wins.
    var query: [String: String] {
        var query: [String: String] = [:]
        forEachParameter { key, value in
            if query[key] == nil { query[key] = value() }
            return true
        }
        return query
    }

    /// The raw bytes of the first `name` parameter whose value needs no percent-decoding (base64url never does),
    /// handed to `body` without copying; `nil` when there is none such (decode ``parameter(_:)`` then).
    func withRawParameter<T>(_ name: StaticString, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T? {
        let wanted = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        var result: T?
        forEachPair { key, value in
            guard let value, key.elementsEqual(wanted) else { return true }
            if !value.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { result = body(value) }
            return false
        }
        return result
    }

    /// The first value of one parameter, found without decoding the others.
    func parameter(_ name: String) -> String? {
        var found: String?
        forEachParameter { key, value in
            guard key == name else { return true }
            found = value()
            return false
        }
        return found
    }

    /// Calls `body` with each parameter's decoded name and a way to decode its value, in order, while it returns
    /// `true`; parameters whose name or value is not valid percent-encoded UTF-8 are skipped.
    private func forEachParameter(_ body: (String, () -> String?) -> Bool) {
        forEachPair { rawKey, rawValue in
            guard let key = PercentDecoding.decode(rawKey) else { return true }
            var valid = true
            let goOn = body(key) {
                let value = PercentDecoding.decode(rawValue ?? UnsafeBufferPointer(start: nil, count: 0))
                valid = value != nil
                return value
            }
            return goOn || !valid
        }
    }

    /// Calls `body` with the raw bytes of each non-empty `name=value` pair of the query (`value` is `nil` without
    /// `=`), in order, while it returns `true`.
    private func forEachPair(_ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>?) -> Bool) {
        var query = rawQuery
        query.withUTF8 { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                var equals: Int?
                while end < bytes.count, bytes[end] != UInt8(ascii: "&") {
                    if equals == nil, bytes[end] == UInt8(ascii: "=") { equals = end }
                    end += 1
                }
                if end > start {
                    let key = UnsafeBufferPointer(rebasing: bytes[start..<(equals ?? end)])
                    let value = equals.map { UnsafeBufferPointer(rebasing: bytes[($0 + 1)..<end]) }
                    guard body(key, value) else { return }
                }
                start = end + 1
            }
        }
    }

    /// The path's segments (`/a//b/` is `a`, `b`).
    var segments: [Substring] { path.split(separator: "/", omittingEmptySubsequences: true) }
}

/// Query parameter decoding (`application/x-www-form-urlencoded`): `+` is a space, `%XX` a byte; the result must be
/// UTF-8.
enum PercentDecoding {
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard bytes.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else {
            return String(validating: bytes, as: UTF8.self)
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                decoded.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                    let low = hexValue(bytes[index + 2])
                else { return nil }
                decoded.append(high << 4 | low)
                index += 2
            } else {
                decoded.append(byte)
            }
            index += 1
        }
        return String(validating: decoded, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// base64url (RFC 4648 §5) as RFC 8484 uses it: no padding, though padding is tolerated; any other character, or a
/// length no encoding produces, is an error.
enum Base64URL {
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }()

    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode($0) }
    }

    static func decode(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var count = bytes.count
        while count > 0, bytes[count - 1] == UInt8(ascii: "=") { count -= 1 }
        guard count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in bytes[..<count] {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }
}
