import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
/// One problem found in a configuration file, with its position.
public struct ConfigDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// How bad the problem is.
    package enum Severity: String, Sendable, Hashable {
        /// The entry was ignored, or the file was rejected.
        case error
        /// The entry was used, but probably not as meant.
        case warning
    }

    /// The file's path as it was given.
    var file: String
    /// The 1-based line, or 0 when the problem concerns the whole file.
    package var line: Int
    /// The 1-based byte column, or 0 when the problem concerns the whole line or file.
    package var column: Int
    /// What is wrong.
    package var message: String
    /// Error or warning.
    package var severity: Severity

    /// Creates a diagnostic.
    init(file: String, line: Int, column: Int, message: String, severity: Severity = .error) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.severity = severity
    }

    /// `file:line:column: error: message`, the form compilers and editors understand.
    public var description: String {
        var position = file
        if line > 0 { position += ":\(line)" }
        if column > 0 { position += ":\(column)" }
        return "\(position): \(severity.rawValue): \(message)"
    }
}

/// A configuration file could not be used.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Value: String, Hashable, Sendable {
            case unreadable, invalid
        }

        let value: Value

        /// The file could not be read (missing, not a regular file, too large, no permission).
        public static let unreadable = Code(value: .unreadable)
        /// The file has errors; ``ConfigurationError/diagnostics`` lists them.
        public static let invalid = Code(value: .invalid)

        /// The stable identifier of the code.
        public var description: String { value.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// A summary.
    public var message: String
    /// Every problem found, with positions.
    public var diagnostics: [ConfigDiagnostic]

    /// Creates an error.
    init(code: Code, message: String, diagnostics: [ConfigDiagnostic] = []) {
        self.code = code
        self.message = message
        self.diagnostics = diagnostics
    }

    /// The summary followed by one diagnostic a line.
    public var description: String {
        ([message] + diagnostics.map(\.description)).joined(separator: "\n")
    }
}
