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

/// A dictionary key over the bytes of a normalised name, hashed and compared as raw bytes.
///
/// Keys made from a `Substring` of a longer name share its storage, so looking up every suffix of a name (for
/// wildcards) allocates nothing.
struct NameKey: Hashable, Sendable {
    let text: Substring

    init(_ text: Substring) { self.text = text }
    init(_ text: String) { self.text = text[...] }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    static func == (lhs: NameKey, rhs: NameKey) -> Bool {
        lhs.text.utf8.elementsEqual(rhs.text.utf8)
    }
}
