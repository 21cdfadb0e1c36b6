package import Configuration
package import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients

/// The `system.*` keys: how the operating system's resolver (getaddrinfo) is used when it is asked.
package struct SystemResolverSettings: Sendable, Hashable {
    /// The TTL given to the system resolver's answers (which carry none), in seconds.
    package var ttlSeconds: Int
    /// The most system lookups run at once (each blocks a thread of its own).
    package var threads: Int

    /// The defaults: 30 s TTL, 4 threads.
    package static var `default`: SystemResolverSettings {
        // Reading from an empty provider gives every default; it cannot fail.
        try! SystemResolverSettings(configReader: defaultsReader)
    }

    /// Reads the `system.*` keys; missing keys take their defaults.
    /// - Throws: `DNSError.Code.invalidConfiguration` naming the key for a bad value.
    package init(configReader config: ConfigReader) throws(DNSError) {
        // Placeholders only: every field below overwrites its property.
        ttlSeconds = 0
        threads = 0
        try SettingField.readAll(Self.fields, from: config, into: &self)
    }

    static let fields: [SettingField<SystemResolverSettings>] = [
        .int(
            "system.ttlSeconds", \.ttlSeconds, default: 30, "TTL given to the system resolver's answers, seconds",
            range: 0...86_400),
        .int("system.threads", \.threads, default: 4, "most system resolver lookups at once", range: 1...256),
    ]
}
