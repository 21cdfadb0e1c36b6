import Configuration
import HTTPDNS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
                let candidates = Array(Set(siblings).union(others)).sorted()
                let known = candidates.joined(separator: ", ")
                let guess = nearest(member.key, in: candidates).map { name in
                    "did you mean '\((components + [name]).joined(separator: "."))'? "
                }
                diagnose(
                    member.keyPosition,
                    "unknown key '\(HostName.printable(dotted))'; \(guess ?? "")known here: \(known)", .error)
            }
        }
    }

    /// Reports each file a key of `table` names (`SettingKey.namesFiles`) that is not there, at the key's position:
    /// the file as `values` hold it (relative paths already resolved), the keys under `section`. A missing file or a
    /// directory is an error; one that exists but that this user cannot read is a warning (the service may run as
    /// another user, and a root-only private key is right). A key the environment overrides is left to the value
    /// the environment gives.
    static func checkFiles(
        table: [SettingKey], section: [String] = [], values: [AbsoluteConfigKey: ConfigValue],
        positions: [String: PositionedJSON.Position], environment: [String: String],
        diagnose: (PositionedJSON.Position?, String, ConfigDiagnostic.Severity) -> Void
    ) {
        for key in table where key.namesFiles {
            let components = section + key.path.split(separator: ".").map(String.init)
            guard environment[SettingKey.environmentVariable(for: components.joined(separator: "."))] == nil else {
                continue
            }
            let paths: [String]
            switch values[AbsoluteConfigKey(components)]?.content {
            case .string(let path)?: paths = [path]
            case .stringArray(let list)?: paths = list
            default: continue
            }
            let dotted = components.joined(separator: ".")
            for path in paths where !path.isEmpty {
                var status = stat()
                let problem: (String, ConfigDiagnostic.Severity)?
                if stat(path, &status) != 0 {
                    problem = ("does not exist", .error)
                } else if status.st_mode & S_IFMT == S_IFDIR {
                    problem = ("is a directory", .error)
                } else if access(path, R_OK) != 0 {
                    problem = ("this user cannot read", .warning)
                } else {
                    problem = nil
                }
                if let (reason, severity) = problem {
                    diagnose(
                        positions[dotted], "'\(dotted)' names \(HostName.printable(path)), which \(reason)", severity)
                }
            }
        }
    }

    /// The known name closest to the mistyped `name` (letters' case aside), when it is close enough to be the one
    /// meant: at most a third of its letters (and at least 2) added, removed or changed.
    static func nearest(_ name: String, in known: [String]) -> String? {
        let typed = Array(name.lowercased().utf8.prefix(64))
        var best: (name: String, distance: Int)?
        for candidate in known {
            let distance = editDistance(typed, Array(candidate.lowercased().utf8.prefix(64)))
            if distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        guard let best, best.distance <= max(2, typed.count / 3) else { return nil }
        return best.name
    }

    /// The Levenshtein distance of `a` and `b` (one row at a time).
    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        guard !a.isEmpty else { return b.count }
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + [Int](repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
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
