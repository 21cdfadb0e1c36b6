/// One documented settings key: its path, type, default, limits and meaning.
///
/// ``HostResolver/Configuration/keys`` lists every key. The same table drives the file check (unknown keys, wrong types,
/// bad values, with positions), the environment-variable names, `hostsctl config show` and the README.
package struct SettingKey: Sendable, Hashable {
    /// The value type a key takes.
    package enum Kind: String, Sendable, Hashable {
        /// A string.
        case string
        /// An integer.
        case int
        /// `true` or `false`.
        case bool
        /// An array of strings.
        case stringArray = "string array"
        /// An array of integers.
        case intArray = "integer array"
    }

    /// The dotted path, with `*` standing for a provider name (`httpdns.provider.*.api`).
    package var path: String
    /// The value type.
    package var kind: Kind
    /// The default, as text for people.
    package var defaultText: String
    /// What the key means.
    package var help: String
    /// The values a string (or each element of a string array) may take, if limited.
    package var allowed: [String]?
    /// The range an integer (or each element of an integer array) must be in, if limited.
    package var range: ClosedRange<Int>?
    /// Checks one string or string element; returns what is wrong, or `nil`.
    var check: (@Sendable (String) -> String?)?
    /// Whether the value names a file (or, for an array, files) that must exist and be readable: a settings file
    /// that names one that is not is refused at its key's position, by `config check` as by every load.
    package var namesFiles = false

    /// The environment variable that overrides this key (not for keys under a provider name):
    /// `HOSTSCTL_` and the path in upper case, camel case split with `_`, e.g. `HOSTSCTL_CARES_TIMEOUT_MS`.
    package var environmentVariable: String { Self.environmentVariable(for: path) }

    /// The environment variable for a concrete dotted path.
    package static func environmentVariable(for path: String) -> String {
        var out = "HOSTSCTL"
        for component in path.split(separator: ".") {
            out += "_"
            var previousWasLower = false
            for character in component {
                if character.isUppercase, previousWasLower { out += "_" }
                out += character.isLetter || character.isNumber ? character.uppercased() : "_"
                previousWasLower = character.isLowercase || character.isNumber
            }
        }
        return out
    }

    /// Whether `components` (with concrete provider names) is this key.
    package func matches(_ components: [String]) -> Bool {
        let pattern = path.split(separator: ".")
        guard pattern.count == components.count else { return false }
        return zip(pattern, components).allSatisfy { $0 == "*" || $0 == $1 }
    }

    /// Whether `components` is an object on the way to this key.
    package func hasPrefix(_ components: [String]) -> Bool {
        let pattern = path.split(separator: ".")
        guard pattern.count > components.count else { return false }
        return zip(pattern, components).allSatisfy { $0 == "*" || $0 == $1 }
    }

    /// What is wrong with a string value, or `nil`.
    package func problem(with text: String) -> String? {
        if let allowed, !allowed.contains(text) {
            return "'\(HostName.printable(text))' is not one of \(allowed.joined(separator: ", "))"
        }
        return check?(text)
    }

    /// What is wrong with an integer value, or `nil`.
    package func problem(with number: Int) -> String? {
        guard let range, !range.contains(number) else { return nil }
        return "\(number) is outside \(range.lowerBound)...\(range.upperBound)"
    }

    /// Keys are equal when path and kind are.
    package static func == (lhs: SettingKey, rhs: SettingKey) -> Bool { lhs.path == rhs.path && lhs.kind == rhs.kind }
    /// Hashes the path.
    package func hash(into hasher: inout Hasher) { hasher.combine(path) }
}

extension SettingKey {
    package init(
        _ path: String,
        _ kind: Kind,
        default defaultText: String,
        _ help: String,
        allowed: [String]? = nil,
        range: ClosedRange<Int>? = nil,
        check: (@Sendable (String) -> String?)? = nil
    ) {
        self.path = path
        self.kind = kind
        self.defaultText = defaultText
        self.help = help
        self.allowed = allowed
        self.range = range
        self.check = check
    }
}
