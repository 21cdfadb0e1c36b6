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
    /// - Throws: ``DNSError`` with ``DNSError/Code/badName`` saying what is wrong.
    public init(_ text: some StringProtocol) throws(DNSError) {
        let text = String(text)
        if text.hasPrefix("*.") {
            self = .wildcard(suffix: try HostName(text.dropFirst(2)))
        } else if text.contains("*") {
            throw DNSError(
                code: .badName,
                message: "invalid wildcard '\(HostName.printable(text))': only a leading '*.' is allowed, as in *.example.com",
                host: HostName.printable(text)
            )
        } else {
            self = .exact(try HostName(text))
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

/// A dictionary key over the bytes of a normalised name, with its hash computed once.
///
/// Keys stored in a table own their bytes. Keys built for a lookup borrow the bytes of the name being looked up
/// (``withBorrowed(_:_:)``) and live only inside that lookup, so probing every suffix of a name (for wildcards)
/// allocates and retains nothing. Equality checks the hash first, then the bytes with `memcmp`.
struct NameKey: Hashable, @unchecked Sendable {
    private enum Storage {
        case owned([UInt8])
        case borrowed(UnsafeRawBufferPointer)
    }

    // `@unchecked Sendable`: a borrowed key never leaves the `withBorrowed` closure that made it; owned keys are
    // immutable arrays.
    private let storage: Storage
    private let hashCode: Int

    /// A key that owns a copy of `text`'s bytes.
    init(_ text: String) {
        let bytes = Array(text.utf8)
        self.storage = .owned(bytes)
        self.hashCode = bytes.withUnsafeBytes(Self.hash)
    }

    private init(borrowing bytes: UnsafeRawBufferPointer) {
        self.storage = .borrowed(bytes)
        self.hashCode = Self.hash(bytes)
    }

    /// Calls `body` with a key over `bytes`; the key must not escape.
    static func withBorrowed<Result>(_ bytes: UnsafeRawBufferPointer, _ body: (NameKey) -> Result) -> Result {
        body(NameKey(borrowing: bytes))
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hashCode)
    }

    static func == (lhs: NameKey, rhs: NameKey) -> Bool {
        guard lhs.hashCode == rhs.hashCode else { return false }
        return lhs.withBytes { left in
            rhs.withBytes { right in
                left.count == right.count && (left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
    }

    private func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        switch storage {
        case .owned(let bytes): bytes.withUnsafeBytes(body)
        case .borrowed(let bytes): body(bytes)
        }
    }

    /// 64-bit FNV-1a: cheap for short names; the dictionary seeds its own hasher on top of it.
    private static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return Int(truncatingIfNeeded: hash)
    }
}
