package import Configuration
package import HTTPDNSCore

/// The keys of one section of the settings file that a module above the resolver owns (`interception` is the URL
/// protocol's and `HTTPDNSClient`'s, `serve` the server's, `grpc` the gRPC front's), and how that module reads them:
/// each declares its section beside its configuration (`HTTPDNSInterceptor.Configuration.section`, …).
///
/// The loader keeps each such section as the file wrote it (and the `HOSTSCTL_` variables under its prefix), and
/// ``Settings/read(_:)`` checks and reads it, with the same positioned diagnostics as the resolver's own keys.
/// `SettingsFile.load(path:environment:sections:)` checks the sections it is given right away, so
/// `hostsctl config check` reports every key of the file.
public struct SettingsSection<Value: Sendable>: Sendable {
    /// The top-level key, e.g. `interception`.
    let name: String
    /// The section's keys, documented.
    let keys: [SettingKey]
    /// Reads the section from a configuration; missing keys take their defaults.
    let read: @Sendable (ConfigReader) throws(HTTPDNSError) -> Value
    /// The effective values of a read section, as `hostsctl config show` prints them.
    let values: @Sendable (Value) -> [SettingValue]

    /// A section whose keys are `fields` (paths relative to `name`), read by `read` from a reader scoped to `name`
    /// (the owning type's `init(configReader:)`).
    package init(
        _ name: String, fields: [SettingField<Value>],
        read: @escaping @Sendable (ConfigReader) throws(HTTPDNSError) -> Value
    ) {
        self.name = name
        self.keys = SettingField.keys(fields, under: name)
        self.read = { config throws(HTTPDNSError) in try read(config.scoped(to: ConfigKey(name))) }
        self.values = { SettingField.values(fields, of: $0, under: name) }
    }

    /// This section without its value type, for lists of sections.
    package var erased: AnySettingsSection {
        AnySettingsSection(
            name: name, keys: keys,
            values: { [self] settings throws(HTTPDNSError) in values(try settings.read(self)) })
    }
}

/// A ``SettingsSection`` of any value type: its keys, and its effective values in given settings.
package struct AnySettingsSection: Sendable {
    /// The top-level key.
    let name: String
    /// The section's keys, documented.
    package let keys: [SettingKey]
    /// The section's effective values in `settings`.
    package let values: @Sendable (Settings) throws(HTTPDNSError) -> [SettingValue]
}

/// Where a ``Settings`` value was read from, kept so the modules above the resolver can read their own sections from
/// the same place.
enum SettingsOrigin: Sendable {
    /// A configuration reader (``Settings/init(configReader:)``): sections read from it as they are.
    case reader(ConfigReader)
    /// A checked settings file: the sections the loader did not know, kept for their modules.
    case file(SettingsFile.Sections)
}
