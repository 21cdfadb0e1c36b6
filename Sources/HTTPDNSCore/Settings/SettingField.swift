package import Configuration

/// One settings key bound to the property that holds its value. A section's list of fields is the one place where
/// its keys, their defaults, their limits and their meaning are written: the section's `init(configReader:)` reads
/// through it, ``HostResolver/Configuration/keys`` (the file check, the environment variables, `hostsctl config keys`) lists
/// it, and ``HostResolver/Configuration/effectiveValues`` (`hostsctl config show`) prints through it.
package struct SettingField<Section>: Sendable {
    /// The documented key.
    let key: SettingKey
    /// Reads the key (or its default) into the section.
    let read: @Sendable (SettingsReader, inout Section) throws(HTTPDNSError) -> Void
    /// The effective values as (dotted path, text) rows; most keys give one.
    let show: @Sendable (Section) -> [(String, String)]

    /// A key whose value is decoded by `decode` (which applies the default) and printed by `describe`.
    package static func custom<Value>(
        _ path: String, _ kind: SettingKey.Kind, _ field: any WritableKeyPath<Section, Value> & Sendable,
        shown defaultText: String, _ help: String, allowed: [String]? = nil, range: ClosedRange<Int>? = nil,
        check: (@Sendable (String) -> String?)? = nil,
        decode: @escaping @Sendable (SettingsReader, SettingKey) throws(HTTPDNSError) -> Value,
        describe: @escaping @Sendable (Value) -> String
    ) -> SettingField {
        let key = SettingKey(
            path, kind, default: defaultText, help, allowed: allowed, range: range, check: check)
        return SettingField(
            key: key,
            read: { reader, section throws(HTTPDNSError) in section[keyPath: field] = try decode(reader, key) },
            show: { section in [(path, describe(section[keyPath: field]))] })
    }

    /// A key whose value sets several properties: `read` reads it (applying the default) into the section, and
    /// `describe` prints it back from them.
    package static func compound(
        _ path: String, _ kind: SettingKey.Kind, shown defaultText: String, _ help: String,
        check: (@Sendable (String) -> String?)? = nil,
        read: @escaping @Sendable (SettingsReader, SettingKey, inout Section) throws(HTTPDNSError) -> Void,
        describe: @escaping @Sendable (Section) -> String
    ) -> SettingField {
        let key = SettingKey(path, kind, default: defaultText, help, check: check)
        return SettingField(
            key: key, read: { reader, section throws(HTTPDNSError) in try read(reader, key, &section) },
            show: { section in [(path, describe(section))] })
    }

    /// An integer key.
    package static func int(
        _ path: String, _ field: any WritableKeyPath<Section, Int> & Sendable, default value: Int, _ help: String,
        range: ClosedRange<Int>? = nil
    ) -> SettingField {
        custom(
            path, .int, field, shown: "\(value)", help, range: range,
            decode: { reader, key throws(HTTPDNSError) in try reader.int(key, default: value) }, describe: { "\($0)" })
    }

    /// A duration key written in whole milliseconds (`…Ms`).
    package static func milliseconds(
        _ path: String, _ field: any WritableKeyPath<Section, Duration> & Sendable, default value: Int, _ help: String,
        range: ClosedRange<Int>? = nil
    ) -> SettingField {
        duration(path, field, default: value, help, range: range, from: Duration.milliseconds) {
            $0.roundedUpMilliseconds
        }
    }

    /// A duration key written in whole seconds (`…Seconds`).
    package static func seconds(
        _ path: String, _ field: any WritableKeyPath<Section, Duration> & Sendable, default value: Int, _ help: String,
        range: ClosedRange<Int>? = nil
    ) -> SettingField {
        duration(path, field, default: value, help, range: range, from: Duration.seconds) { $0.components.seconds }
    }

    /// A duration key written as a whole number of a unit: `from` makes the duration, `number` prints it back.
    private static func duration(
        _ path: String, _ field: any WritableKeyPath<Section, Duration> & Sendable, default value: Int, _ help: String,
        range: ClosedRange<Int>?, from: @escaping @Sendable (Int) -> Duration,
        number: @escaping @Sendable (Duration) -> Int64
    ) -> SettingField {
        custom(
            path, .int, field, shown: "\(value)", help, range: range,
            decode: { reader, key throws(HTTPDNSError) in from(try reader.int(key, default: value)) },
            describe: { "\(number($0))" })
    }

    /// A `true`/`false` key.
    package static func bool(
        _ path: String, _ field: any WritableKeyPath<Section, Bool> & Sendable, default value: Bool, _ help: String
    ) -> SettingField {
        custom(
            path, .bool, field, shown: "\(value)", help,
            decode: { reader, key throws(HTTPDNSError) in try reader.bool(key, default: value) }, describe: { "\($0)" })
    }

    /// A string key whose empty value (the default) means "none"; `none` is how that is printed.
    package static func optionalString(
        _ path: String, _ field: any WritableKeyPath<Section, String?> & Sendable, shown defaultText: String,
        none: String, _ help: String
    ) -> SettingField {
        custom(
            path, .string, field, shown: defaultText, help,
            decode: { reader, key throws(HTTPDNSError) in
                let text = try reader.string(key, default: "")
                return text.isEmpty ? nil : text
            }, describe: { $0 ?? none })
    }

    /// A string key.
    package static func string(
        _ path: String, _ field: any WritableKeyPath<Section, String> & Sendable, default value: String, _ help: String
    ) -> SettingField {
        custom(
            path, .string, field, shown: value, help,
            decode: { reader, key throws(HTTPDNSError) in try reader.string(key, default: value) }, describe: { $0 })
    }

    /// An integer array key.
    package static func ints(
        _ path: String, _ field: any WritableKeyPath<Section, [Int]> & Sendable, default value: [Int], _ help: String,
        range: ClosedRange<Int>? = nil
    ) -> SettingField {
        let key = SettingKey(
            path, .intArray, default: SettingsReader.list(value.map(String.init)), help, range: range)
        return SettingField(
            key: key,
            read: { reader, section throws(HTTPDNSError) in
                section[keyPath: field] = try reader.ints(key, default: value)
            },
            show: { section in [(path, SettingsReader.list(section[keyPath: field].map(String.init)))] })
    }

    /// A string key whose value is one of a `RawRepresentable` type's cases.
    package static func choice<Value: RawRepresentable & CaseIterable & Sendable>(
        _ path: String, _ field: any WritableKeyPath<Section, Value> & Sendable, default value: Value, _ help: String
    ) -> SettingField where Value.RawValue == String {
        custom(
            path, .string, field, shown: value.rawValue, help, allowed: Value.allCases.map(\.rawValue),
            decode: { reader, key throws(HTTPDNSError) in
                Value(rawValue: try reader.string(key, default: value.rawValue)) ?? value
            }, describe: { $0.rawValue })
    }

    /// A string array key.
    package static func strings(
        _ path: String, _ field: any WritableKeyPath<Section, [String]> & Sendable, default value: [String] = [],
        shown defaultText: String? = nil, _ help: String, check: (@Sendable (String) -> String?)? = nil
    ) -> SettingField {
        custom(
            path, .stringArray, field, shown: defaultText ?? SettingsReader.list(value), help, check: check,
            decode: { reader, key throws(HTTPDNSError) in try reader.strings(key, default: value) },
            describe: { SettingsReader.list($0) })
    }

    /// A key read from the file and never written back: it only appears in the key table (the per-provider keys,
    /// which the providers field reads).
    package static func documented(_ key: SettingKey) -> SettingField {
        SettingField(key: key, read: { _, _ in }, show: { _ in [] })
    }

    /// This field as one of a larger value's, whose `part` holds this field's section: a section read by two
    /// components (the server's `serve`: the listener's keys and the service's) lists their fields as one.
    package func lifted<Whole>(_ part: any WritableKeyPath<Whole, Section> & Sendable) -> SettingField<Whole> {
        let read = self.read
        let show = self.show
        return SettingField<Whole>(
            key: key, read: { reader, whole throws(HTTPDNSError) in try read(reader, &whole[keyPath: part]) },
            show: { whole in show(whole[keyPath: part]) })
    }

    /// This field with its key marked as naming files that must be readable (`SettingKey.namesFiles`).
    package func namingFiles() -> SettingField {
        var key = key
        key.namesFiles = true
        return SettingField(key: key, read: read, show: show)
    }

    /// This field with `rows` as its effective values instead of its one row.
    package func showing(_ rows: @escaping @Sendable (Section) -> [(String, String)]) -> SettingField {
        let own = show
        return SettingField(key: key, read: read, show: { own($0) + rows($0) })
    }

    /// Reads every field of `fields` into `section` from `config`, a reader scoped to the section: the fields'
    /// paths are relative to `scope` (`nil` for keys at the top level), which errors name in front of them.
    package static func readAll(
        _ fields: [SettingField], from config: ConfigReader, scope: String? = nil, into section: inout Section
    ) throws(HTTPDNSError) {
        let reader = SettingsReader(config: config, scope: scope)
        for field in fields { try field.read(reader, &section) }
    }

    /// The keys of `fields` with their full paths, under `scope`.
    package static func keys(_ fields: [SettingField], under scope: String? = nil) -> [SettingKey] {
        fields.map { field in
            var key = field.key
            key.path = SettingsReader.path(key.path, under: scope)
            return key
        }
    }

    /// The effective values of `section` as (full dotted path, text) rows, in the order of `fields`.
    package static func values(_ fields: [SettingField], of section: Section, under scope: String? = nil)
        -> [SettingValue]
    {
        fields.flatMap { field in
            field.show(section).map { SettingValue(path: SettingsReader.path($0.0, under: scope), text: $0.1) }
        }
    }
}

/// One effective setting, as `hostsctl config show` prints it.
package struct SettingValue: Sendable, Hashable {
    /// The concrete dotted path (provider keys carry the provider's name).
    package var path: String
    /// The value as text.
    package var text: String
}

/// An empty configuration: reading a section from it gives the section's defaults.
package let defaultsReader = ConfigReader(provider: InMemoryProvider(values: [:]))

/// Typed reads of documented keys, with errors that name the key and its environment variable.
package struct SettingsReader {
    /// The reader, scoped to the section being read.
    package let config: ConfigReader
    /// The section's path in the settings file (`cares`), which errors name in front of a relative key; `nil` at
    /// the top level.
    let scope: String?

    /// A reader of `config`, a reader scoped to `scope`.
    package init(config: ConfigReader, scope: String? = nil) {
        self.config = config
        self.scope = scope
    }

    /// `path` under `scope`: `cares` and `timeoutMs` make `cares.timeoutMs`.
    static func path(_ path: String, under scope: String?) -> String {
        scope.map { "\($0).\(path)" } ?? path
    }

    /// The error for a bad value of `path` (relative to the scope).
    package func invalid(_ path: String, _ reason: String) -> HTTPDNSError {
        let path = Self.path(path, under: scope)
        return HTTPDNSError(
            code: .invalidConfiguration,
            message: "setting \(path) (\(SettingKey.environmentVariable(for: path))): \(reason)")
    }

    /// Whether `path` has a value of any kind.
    package func isSet(_ path: String) -> Bool {
        let key = ConfigKey(path)
        return config.string(forKey: key) != nil || config.int(forKey: key) != nil
            || config.bool(forKey: key) != nil || config.stringArray(forKey: key) != nil
            || config.intArray(forKey: key) != nil
    }

    /// A string, checked against the key's allowed values and check.
    package func string(_ key: SettingKey, at path: String? = nil, default fallback: String) throws(HTTPDNSError)
        -> String
    {
        let path = path ?? key.path
        let value = config.string(forKey: ConfigKey(path)) ?? fallback
        if let problem = key.problem(with: value) { throw invalid(path, problem) }
        return value
    }

    /// An integer, checked against the key's range.
    package func int(_ key: SettingKey, at path: String? = nil, default fallback: Int) throws(HTTPDNSError) -> Int {
        let path = path ?? key.path
        if let text = config.string(forKey: ConfigKey(path)), Int(text) == nil,
            config.int(forKey: ConfigKey(path)) == nil
        {
            throw invalid(path, "'\(HostName.printable(text))' is not an integer")
        }
        let value = config.int(forKey: ConfigKey(path)) ?? fallback
        if let problem = key.problem(with: value) { throw invalid(path, problem) }
        return value
    }

    /// `true` or `false`.
    package func bool(_ key: SettingKey, at path: String? = nil, default fallback: Bool) throws(HTTPDNSError) -> Bool {
        let path = path ?? key.path
        if let text = config.string(forKey: ConfigKey(path)), config.bool(forKey: ConfigKey(path)) == nil {
            throw invalid(path, "'\(HostName.printable(text))' is not true or false")
        }
        return config.bool(forKey: ConfigKey(path)) ?? fallback
    }

    /// A string array, each element checked.
    package func strings(_ key: SettingKey, at path: String? = nil, default fallback: [String]) throws(HTTPDNSError)
        -> [String]
    {
        let path = path ?? key.path
        let values = config.stringArray(forKey: ConfigKey(path)) ?? fallback
        for value in values {
            if let problem = key.problem(with: value) { throw invalid(path, problem) }
        }
        return values
    }

    /// An integer array, each element checked against the key's range.
    func ints(_ key: SettingKey, default fallback: [Int]) throws(HTTPDNSError) -> [Int] {
        let values = config.intArray(forKey: ConfigKey(key.path)) ?? fallback
        for value in values {
            if let problem = key.problem(with: value) { throw invalid(key.path, problem) }
        }
        return values
    }

    /// How lists are printed: `[a, b]`.
    package static func list(_ values: [String]) -> String { "[" + values.joined(separator: ", ") + "]" }
}
