import HTTPDNSCore
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    package import Musl
#elseif canImport(Darwin)
    package import Darwin
#endif

/// A secret (an HTTPDNS signing secret or encryption key) that never shows up in logs or printed values.
///
/// Its `description` and `debugDescription` are `<redacted>`. Read it from the environment with
/// ``init(environmentVariable:)``; the command line never takes secrets, since arguments are visible to every
/// user of the machine.
public struct HTTPDNSSecret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The secret text. Only the signing code reads it.
    package let value: String

    /// Wraps a secret.
    public init(_ value: String) { self.value = value }

    /// Reads a secret from an environment variable; `nil` when it is unset or empty.
    public init?(environmentVariable name: String) {
        guard let raw = getenv(name), raw.pointee != 0 else { return nil }
        self.value = String(cString: raw)
    }

    /// `<redacted>`.
    public var description: String { "<redacted>" }
    /// `<redacted>`.
    public var debugDescription: String { "<redacted>" }
    /// A mirror without children, so `dump`, `Mirror` and debuggers that walk stored properties never reach the
    /// value (the struct itself, or any configuration that holds it).
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
