/// The data of an SVCB or HTTPS record (RFC 9460 §2.2), read and written by the rules of RFC 9460 §2.2 and §8 and
/// RFC 9461: the priority (0 is AliasMode), the target name and the parameters, each kept as the bytes it came as
/// (unknown keys included) with typed views of the keys RFC 9460 and RFC 9461 define.
///
/// Reading refuses what RFC 9460 §2.2 says makes the record malformed: keys not in strictly increasing order, a
/// value of the wrong shape for its key (§7), a `mandatory` list that names key 0, repeats a key or names one that is
/// absent (§8), `no-default-alpn` without `alpn` (§7.1.1), a compressed target name (§2.2: it is never compressed)
/// and a target that is no host name. Writing always produces a record that
/// reads back equal.
package struct ServiceBinding: Sendable, Hashable {
    /// Why a record's data was refused.
    package struct Malformed: Error, Hashable, CustomStringConvertible {
        /// What is wrong, in a few words.
        package var reason: String

        package var description: String { "malformed SVCB/HTTPS record: \(reason)" }
    }

    /// The SvcParamKeys of RFC 9460 and RFC 9461 (and RFC 9540's `ohttp`).
    package enum Key {
        package static let mandatory: UInt16 = 0
        package static let alpn: UInt16 = 1
        package static let noDefaultALPN: UInt16 = 2
        package static let port: UInt16 = 3
        package static let ipv4Hint: UInt16 = 4
        package static let ech: UInt16 = 5
        package static let ipv6Hint: UInt16 = 6
        package static let dohPath: UInt16 = 7
        package static let ohttp: UInt16 = 8
    }

    /// 0 for AliasMode, else the ServiceMode priority (lower first).
    package var priority: UInt16
    /// The target name, lower case, with its trailing dot; `.` for the owner itself (ServiceMode) or none (AliasMode).
    package var target: String
    /// Every parameter, by key, as it came (written in increasing key order).
    package var parameters: [UInt16: [UInt8]]

    /// A record of `priority` pointing at `target` with `parameters`.
    package init(priority: UInt16, target: String = ".", parameters: [UInt16: [UInt8]] = [:]) {
        self.priority = priority
        self.target = target
        self.parameters = parameters
    }

    /// Whether this is an AliasMode record (priority 0): its parameters mean nothing (§2.4.2).
    package var isAlias: Bool { priority == 0 }

    // MARK: Typed views

    /// The ALPN protocol identifiers (`alpn`), `nil` without the key.
    package var alpn: [String]? {
        get {
            guard let value = parameters[Key.alpn] else { return nil }
            var ids: [String] = []
            var position = value.startIndex
            while position < value.endIndex {
                let length = Int(value[position])
                guard position + 1 + length <= value.endIndex else { return nil }
                ids.append(String(decoding: value[position + 1..<position + 1 + length], as: UTF8.self))
                position += 1 + length
            }
            return ids
        }
        set {
            parameters[Key.alpn] = newValue.map { ids in ids.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } }
        }
    }

    /// The port (`port`), `nil` without the key.
    package var port: UInt16? {
        get { parameters[Key.port].flatMap { $0.count == 2 ? UInt16($0[0]) << 8 | UInt16($0[1]) : nil } }
        set { parameters[Key.port] = newValue.map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } }
    }

    /// The IPv4 hints (`ipv4hint`), empty without the key; set to empty to remove it (and its place in
    /// `mandatory`, which may name only keys the record has).
    package var ipv4Hints: [IPAddress] {
        get { Self.addresses(parameters[Key.ipv4Hint], size: 4) }
        set { set(Key.ipv4Hint, newValue.isEmpty ? nil : newValue.flatMap(\.bytes)) }
    }

    /// The IPv6 hints (`ipv6hint`), empty without the key; set to empty to remove it (and its place in
    /// `mandatory`).
    package var ipv6Hints: [IPAddress] {
        get { Self.addresses(parameters[Key.ipv6Hint], size: 16) }
        set { set(Key.ipv6Hint, newValue.isEmpty ? nil : newValue.flatMap(\.bytes)) }
    }

    /// Sets `key`'s value; removing it takes it out of `mandatory` too (and `mandatory` itself when it names nothing
    /// else), so the record stays well formed (RFC 9460 §8).
    private mutating func set(_ key: UInt16, _ value: [UInt8]?) {
        parameters[key] = value
        guard value == nil, mandatory.contains(key) else { return }
        let rest = mandatory.filter { $0 != key }
        parameters[Key.mandatory] = rest.isEmpty ? nil : rest.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    /// The ECHConfigList (`ech`), as it came; set to `nil` to remove it (and its place in `mandatory`).
    package var ech: [UInt8]? {
        get { parameters[Key.ech] }
        set { set(Key.ech, newValue) }
    }

    /// The DoH path template (`dohpath`, RFC 9461).
    package var dohPath: String? { parameters[Key.dohPath].map { String(decoding: $0, as: UTF8.self) } }

    /// The keys a client must understand to use the record (`mandatory`).
    package var mandatory: [UInt16] {
        guard let value = parameters[Key.mandatory] else { return [] }
        return stride(from: 0, to: value.count - 1, by: 2).map { UInt16(value[$0]) << 8 | UInt16(value[$0 + 1]) }
    }

    private static func addresses(_ value: [UInt8]?, size: Int) -> [IPAddress] {
        guard let value, value.count % size == 0 else { return [] }
        return stride(from: 0, to: value.count, by: size).compactMap { IPAddress(bytes: value[$0..<$0 + size]) }
    }

    // MARK: Wire

    /// Reads the record data `rdata` (the bytes of one record's RDATA).
    /// - Throws: ``Malformed`` naming the rule broken.
    package init(rdata: ArraySlice<UInt8>) throws(Malformed) {
        let start = rdata.startIndex
        guard rdata.count >= 3 else { throw Malformed(reason: "shorter than a priority and a target") }
        priority = UInt16(rdata[start]) << 8 | UInt16(rdata[start + 1])
        var position = start + 2
        var labels: [String] = []
        var nameLength = 0
        while true {
            guard position < rdata.endIndex else { throw Malformed(reason: "the target name runs past the data") }
            let length = Int(rdata[position])
            if length == 0 {
                position += 1
                break
            }
            guard length < 64 else { throw Malformed(reason: "the target name is compressed or has a bad label") }
            nameLength += length + 1
            guard nameLength <= 255, position + 1 + length <= rdata.endIndex else {
                throw Malformed(reason: "the target name runs past the data")
            }
            let label = rdata[position + 1...position + length]
            // A target is a host name: letters, digits, `-` and `_` (anything else could not be looked up, and
            // would not survive being written back the same).
            guard label.allSatisfy(Self.isHostNameByte) else {
                throw Malformed(reason: "the target name holds a byte no host name has")
            }
            labels.append(HostName.asciiLowercased(String(decoding: label, as: UTF8.self)))
            position += 1 + length
        }
        target = labels.isEmpty ? "." : labels.joined(separator: ".") + "."
        parameters = [:]
        var previous: Int = -1
        while position < rdata.endIndex {
            guard position + 4 <= rdata.endIndex else {
                throw Malformed(reason: "a parameter's header runs past the data")
            }
            let key = UInt16(rdata[position]) << 8 | UInt16(rdata[position + 1])
            let length = Int(rdata[position + 2]) << 8 | Int(rdata[position + 3])
            guard Int(key) > previous else { throw Malformed(reason: "key \(key) is out of order or repeated") }
            guard position + 4 + length <= rdata.endIndex else {
                throw Malformed(reason: "the value of key \(key) runs past the data")
            }
            let value = Array(rdata[position + 4..<position + 4 + length])
            try Self.check(key, value)
            parameters[key] = value
            previous = Int(key)
            position += 4 + length
        }
        for key in mandatory where parameters[key] == nil {
            throw Malformed(reason: "mandatory key \(key) is absent")
        }
        // §7.1.1: without alpn, no-default-alpn would leave no protocol at all.
        if parameters[Key.noDefaultALPN] != nil, parameters[Key.alpn] == nil {
            throw Malformed(reason: "no-default-alpn without alpn")
        }
    }

    /// Whether `byte` may be in a label of a target name.
    static func isHostNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// The record data: priority, target, parameters in increasing key order.
    package var rdata: [UInt8] {
        var out = [UInt8(priority >> 8), UInt8(priority & 0xFF)]
        if target != "." {
            for label in target.split(separator: ".") {
                out.append(UInt8(label.utf8.count))
                out += label.utf8
            }
        }
        out.append(0)
        for key in parameters.keys.sorted() {
            let value = parameters[key] ?? []
            out += [UInt8(key >> 8), UInt8(key & 0xFF), UInt8(value.count >> 8), UInt8(value.count & 0xFF)] + value
        }
        return out
    }

    /// Checks one parameter's value against its key's rules (RFC 9460 §7 and §8, RFC 9461 §5).
    static func check(_ key: UInt16, _ value: [UInt8]) throws(Malformed) {
        switch key {
        case Key.mandatory:
            guard !value.isEmpty, value.count % 2 == 0 else {
                throw Malformed(reason: "mandatory is not a list of keys")
            }
            let keys = stride(from: 0, to: value.count, by: 2).map { UInt16(value[$0]) << 8 | UInt16(value[$0 + 1]) }
            guard !keys.contains(Key.mandatory) else { throw Malformed(reason: "mandatory names itself") }
            guard zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) else {
                throw Malformed(reason: "mandatory's keys are out of order or repeated")
            }
        case Key.alpn:
            var position = 0
            guard !value.isEmpty else { throw Malformed(reason: "alpn is empty") }
            while position < value.count {
                let length = Int(value[position])
                guard length > 0, position + 1 + length <= value.count else {
                    throw Malformed(reason: "alpn holds an empty or cut identifier")
                }
                position += 1 + length
            }
        case Key.noDefaultALPN, Key.ohttp:
            guard value.isEmpty else { throw Malformed(reason: "key \(key) takes no value") }
        case Key.port:
            guard value.count == 2 else { throw Malformed(reason: "port is not two bytes") }
        case Key.ipv4Hint:
            guard !value.isEmpty, value.count % 4 == 0 else {
                throw Malformed(reason: "ipv4hint is not IPv4 addresses")
            }
        case Key.ipv6Hint:
            guard !value.isEmpty, value.count % 16 == 0 else {
                throw Malformed(reason: "ipv6hint is not IPv6 addresses")
            }
        case Key.dohPath:
            // RFC 9461 §5: a relative URI template (UTF-8) with a `dns` variable.
            let text = String(decoding: value, as: UTF8.self)
            guard Array(text.utf8) == value, text.hasPrefix("/"), text.contains("{"), text.contains("dns") else {
                throw Malformed(reason: "dohpath is not a relative URI template with a dns variable")
            }
        default:
            break
        }
    }
}
