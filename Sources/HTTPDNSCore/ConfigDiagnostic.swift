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
    package var file: String
    /// The 1-based line, or 0 when the problem concerns the whole file.
    package var line: Int
    /// The 1-based byte column, or 0 when the problem concerns the whole line or file.
    package var column: Int
    /// What is wrong.
    package var message: String
    /// Error or warning.
    package var severity: Severity

    /// Creates a diagnostic.
    package init(file: String, line: Int, column: Int, message: String, severity: Severity = .error) {
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
