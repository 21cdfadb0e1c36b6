public import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A name in an overrides file: an exact host name, or a wildcard `*.suffix` that matches every name ending in
/// `.suffix` (but not `suffix` itself).
public enum HostPattern: Hashable, Sendable, CustomStringConvertible {
    /// One exact name.
    case exact(HostName)
    /// Every name under `suffix`, written `*.suffix`.
    case wildcard(suffix: HostName)

    /// Parses `name` or `*.suffix`. Matching is case-insensitive and ignores one trailing dot.
    /// - Throws: `HTTPDNSError` with `HTTPDNSError.Code.badName` saying what is wrong.
    public init(_ text: some StringProtocol) throws(HTTPDNSError) {
        var text = String(text)
        let result = text.withUTF8 { bytes in Result { () throws(HTTPDNSError) in try HostPattern(utf8: bytes) } }
        self = try result.get()
    }

    /// Parses raw bytes; allocates only the name.
    init(utf8 bytes: UnsafeBufferPointer<UInt8>) throws(HTTPDNSError) {
        if bytes.count >= 2, bytes[0] == UInt8(ascii: "*"), bytes[1] == UInt8(ascii: ".") {
            self = .wildcard(suffix: try HostName(utf8: UnsafeBufferPointer(rebasing: bytes.dropFirst(2))))
        } else if bytes.contains(UInt8(ascii: "*")) {
            let text = String(decoding: bytes, as: UTF8.self)
            throw HTTPDNSError(
                code: .badName,
                message:
                    "invalid wildcard '\(HostName.printable(text))': only a leading '*.' is allowed, as in *.example.com",
                host: HostName.printable(text)
            )
        } else {
            self = .exact(try HostName(utf8: bytes))
        }
    }

    /// Whether `name` matches: the same name for an exact pattern, a name ending in `.suffix` for a wildcard.
    package func matches(_ name: HostName) -> Bool {
        switch self {
        case .exact(let exact):
            return exact == name
        case .wildcard(let suffix):
            let text = name.name
            return text.utf8.count > suffix.name.utf8.count + 1 && text.hasSuffix("." + suffix.name)
        }
    }

    /// The pattern as written in a file: `name` or `*.suffix`.
    public var description: String {
        switch self {
        case .exact(let name): name.name
        case .wildcard(let suffix): "*.\(suffix.name)"
        }
    }
}

/// An open-addressing hash index from normalised names (as bytes) to values, built for lookups that allocate
/// and retain nothing.
///
/// Hashes live in a plain `[Int]`, so a probe touches only integers; the bytes of a candidate are compared (with
/// `memcmp`) only when its hash matches. Removing a name keeps its slot and clears its value, so the index never
/// needs tombstones; it is rebuilt when it grows.
struct NameIndex<Value: Sendable>: Sendable {
    /// Per slot: the name's hash (never 0), or 0 for an empty slot.
    private var hashes: [Int]
    /// Per slot: the index into `starts` and `values`.
    private var entries: [Int32]
    /// Every name's bytes, one after the other; entry `i` is `arena[starts[i]..<starts[i + 1]]`.
    private var arena: [UInt8] = []
    private var starts: [Int] = [0]
    private var values: [Value?] = []
    private var liveCount = 0

    init() {
        hashes = [Int](repeating: 0, count: 16)
        entries = [Int32](repeating: -1, count: 16)
    }

    /// The number of names with a value.
    var count: Int { liveCount }

    /// Every name with its value.
    var all: [(name: [UInt8], value: Value)] {
        values.indices.compactMap { entry in values[entry].map { (Array(arena[starts[entry]..<starts[entry + 1]]), $0) }
        }
    }

    /// The value for the name whose bytes are `name`.
    func lookup(_ name: UnsafeRawBufferPointer) -> Value? {
        guard liveCount > 0, let entry = find(name, hash: Self.hash(name)) else { return nil }
        return values[entry]
    }

    /// The current value for `name`, if any.
    subscript(name: String) -> Value? {
        get {
            var name = name
            return name.withUTF8 { lookup(UnsafeRawBufferPointer($0)) }
        }
        set {
            var text = name
            let hash = text.withUTF8 { Self.hash(UnsafeRawBufferPointer($0)) }
            if let entry = text.withUTF8({ find(UnsafeRawBufferPointer($0), hash: hash) }) {
                liveCount += (values[entry] == nil ? 0 : -1) + (newValue == nil ? 0 : 1)
                values[entry] = newValue
                return
            }
            guard let newValue else { return }
            if (values.count + 1) * 4 > hashes.count * 3 { grow() }
            arena.append(contentsOf: name.utf8)
            starts.append(arena.count)
            values.append(newValue)
            liveCount += 1
            insert(entry: values.count - 1, hash: hash)
        }
    }

    private func find(_ name: UnsafeRawBufferPointer, hash: Int) -> Int? {
        // Each buffer is entered once, so probing costs no reference counting.
        hashes.withUnsafeBufferPointer { hashes in
            entries.withUnsafeBufferPointer { entries in
                starts.withUnsafeBufferPointer { starts in
                    arena.withUnsafeBytes { arena -> Int? in
                        let mask = hashes.count - 1
                        var slot = hash & mask
                        while true {
                            let stored = hashes[slot]
                            if stored == 0 { return nil }
                            if stored == hash {
                                let entry = Int(entries[slot])
                                let start = starts[entry]
                                let length = starts[entry + 1] - start
                                if length == name.count
                                    && (length == 0
                                        || memcmp(arena.baseAddress! + start, name.baseAddress!, length) == 0)
                                {
                                    return entry
                                }
                            }
                            slot = (slot + 1) & mask
                        }
                    }
                }
            }
        }
    }

    private mutating func insert(entry: Int, hash: Int) {
        let mask = hashes.count - 1
        var slot = hash & mask
        while hashes[slot] != 0 { slot = (slot + 1) & mask }
        hashes[slot] = hash
        entries[slot] = Int32(entry)
    }

    private mutating func grow() {
        let capacity = hashes.count * 2
        hashes = [Int](repeating: 0, count: capacity)
        entries = [Int32](repeating: -1, count: capacity)
        for entry in values.indices {
            let hash = arena.withUnsafeBytes {
                Self.hash(UnsafeRawBufferPointer(rebasing: $0[starts[entry]..<starts[entry + 1]]))
            }
            insert(entry: entry, hash: hash)
        }
    }

    /// 64-bit FNV-1a, never 0 (0 marks an empty slot), mixed so the low bits used for the slot spread well.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        hash ^= hash >> 29
        return Int(truncatingIfNeeded: hash | 1)
    }
}
