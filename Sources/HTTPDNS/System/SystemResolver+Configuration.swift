import Configuration
import HTTPDNSCore

extension SystemResolver {
    /// How the operating system's resolver runs when it is asked: its threads and the TTL its answers get.
    ///
    /// Package access: the system resolver is a layer of the pipeline, not a component an adopter builds alone;
    /// the settings file's `system.*` keys reach every field.
    struct Configuration: Sendable, Hashable {
        /// The TTL given to the answers, which `getaddrinfo` reports none of (`system.ttlSeconds`, default 30 s).
        var ttl: UInt32 = 30
        /// The most lookups run at once, each blocking a thread of its own (`system.threads`, default 4).
        var threads: Int = 4

        /// The defaults: 30 s TTL, 4 threads.
        init() {}

        /// Reads the `system` section (`ttlSeconds`, `threads`) from `config`, a reader scoped to it; missing keys
        /// take their defaults.
        /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
        init(configReader config: ConfigReader) throws(HTTPDNSError) {
            self.init()
            try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
        }

        /// The section of the settings file these keys live in.
        static let scope = "system"

        /// The `system` keys, bound to the properties they set: `init(configReader:)` reads through them and
        /// `hostsctl config keys` and `config show` list them.
        static let fields: [SettingField<Configuration>] = [
            .custom(
                "ttlSeconds", .int, \.ttl, shown: "30", "TTL given to the system resolver's answers, seconds",
                range: 0...86_400,
                decode: { reader, key throws(HTTPDNSError) in UInt32(try reader.int(key, default: 30)) },
                describe: { "\($0)" }),
            .int("threads", \.threads, default: 4, "most system resolver lookups at once", range: 1...256),
        ]
    }

    /// Starts the threads `configuration` names; at most that many lookups run at once, the rest wait in turn.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` for a thread count out of range.
    convenience init(configuration: Configuration) throws(HTTPDNSError) {
        try self.init(threads: configuration.threads, ttl: configuration.ttl)
    }
}
