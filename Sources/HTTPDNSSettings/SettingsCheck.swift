import Configuration
import HTTPDNS

/// The check of a settings file's JSON against a table of documented keys: unknown keys, values of the wrong type
/// and values out of range become positioned diagnostics; the valid leaves become configuration values.
enum SettingsCheck {
    /// Checks one JSON node against `table`, collecting valid leaves and the positions of their keys. At the top
    /// level, the sections other modules own (``Settings/sectionsOfOtherModules``) go to `deferred` as
    /// they are, for those modules to check.
    static func check(
        _ node: PositionedJSON,
        components: [String],
        table: [SettingKey],
        values: inout [AbsoluteConfigKey: ConfigValue],
        keys: inout [String: PositionedJSON.Position],
        deferred: inout [String: PositionedJSON],
        diagnose: (PositionedJSON.Position?, String, ConfigDiagnostic.Severity) -> Void
    ) {
        guard case .object(let members) = node.value else { return }
        for member in members {
            let path = components + [member.key]
            let dotted = path.joined(separator: ".")
            if member.key.lowercased() == "secret" || member.key.lowercased() == "key" && components.count == 3 {
                diagnose(
                    member.keyPosition,
                    "'\(dotted)': secrets are never read from files; set secretEnv to the name of "
                        + "an environment variable that holds it", .error)
                continue
            }
            if components.isEmpty, Settings.sectionsOfOtherModules.contains(member.key) {
                guard case .object = member.value.value else {
                    diagnose(
                        member.value.position, "'\(dotted)' must be an object, not \(member.value.value.typeName)",
                        .error)
                    continue
                }
                deferred[member.key] = member.value
            } else if let spec = table.first(where: { $0.matches(path) }) {
                keys[dotted] = member.keyPosition
                if let content = leaf(member.value, spec: spec, key: dotted, diagnose: diagnose) {
                    values[AbsoluteConfigKey(path)] = ConfigValue(content, isSecret: false)
                }
            } else if table.contains(where: { $0.hasPrefix(path) }) {
                guard case .object = member.value.value else {
                    diagnose(
                        member.value.position, "'\(dotted)' must be an object, not \(member.value.value.typeName)",
                        .error)
                    continue
                }
                check(
                    member.value, components: path, table: table, values: &values, keys: &keys,
                    deferred: &deferred, diagnose: diagnose)
            } else {
                let siblings = table.filter { $0.hasPrefix(components) }
                    .map { String($0.path.split(separator: ".")[components.count]) }
                let others = components.isEmpty ? Settings.sectionsOfOtherModules : []
                let known = Array(Set(siblings).union(others)).sorted().joined(separator: ", ")
                diagnose(
                    member.keyPosition, "unknown key '\(HostName.printable(dotted))'; known here: \(known)", .error)
            }
        }
    }

    /// The value of a leaf key, or `nil` after a diagnostic.
    private static func leaf(
        _ node: PositionedJSON,
        spec: SettingKey,
        key: String,
        diagnose: (PositionedJSON.Position?, String, ConfigDiagnostic.Severity) -> Void
    ) -> ConfigContent? {
        func wrongType() -> ConfigContent? {
            diagnose(
                node.position,
                "'\(key)' must be \(spec.kind == .int ? "an integer" : spec.kind == .bool ? "true or false" : "a \(spec.kind.rawValue)"), not \(node.value.typeName)",
                .error)
            return nil
        }
        switch (spec.kind, node.value) {
        case (.string, .string(let text)):
            if let problem = spec.problem(with: text) {
                diagnose(node.position, "'\(key)': \(problem)", .error); return nil
            }
            return .string(text)
        case (.int, .number(let number, true)):
            let value = Int(number)
            if let problem = spec.problem(with: value) {
                diagnose(node.position, "'\(key)': \(problem)", .error); return nil
            }
            return .int(value)
        case (.bool, .bool(let flag)):
            return .bool(flag)
        case (.stringArray, .array(let elements)):
            var out: [String] = []
            for element in elements {
                guard case .string(let text) = element.value else {
                    diagnose(element.position, "'\(key)' must hold strings, not \(element.value.typeName)", .error)
                    return nil
                }
                if let problem = spec.problem(with: text) {
                    diagnose(element.position, "'\(key)': \(problem)", .error); return nil
                }
                out.append(text)
            }
            return .stringArray(out)
        case (.intArray, .array(let elements)):
            var out: [Int] = []
            for element in elements {
                guard case .number(let number, true) = element.value else {
                    diagnose(element.position, "'\(key)' must hold integers, not \(element.value.typeName)", .error)
                    return nil
                }
                if let problem = spec.problem(with: Int(number)) {
                    diagnose(element.position, "'\(key)': \(problem)", .error); return nil
                }
                out.append(Int(number))
            }
            return .intArray(out)
        default:
            return wrongType()
        }
    }
}
