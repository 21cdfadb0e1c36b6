import HTTPDNSCore
import HTTPDNSCAres
import HTTPDNSClients
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An overrides file in hosts(5) format: `IP name [name...]` a line, `#` starts a comment.
///
/// ```text
/// # IPv4 and IPv6; several lines for one name give it several addresses
/// 192.0.2.10      api.example.com api
/// 2001:db8::10    api.example.com
/// 198.51.100.7    *.cdn.example.com   # any name under cdn.example.com (not cdn.example.com itself)
/// ```
///
/// Parsing never fails as a whole: every bad line becomes a `ConfigDiagnostic` with its line and column and is
/// skipped, and the good lines are kept. Names are matched case-insensitively and without a trailing dot.
public struct HostsFile: Sendable {
    /// One good line: an address and the names it is given to.
    package struct Entry: Sendable, Hashable {
        /// The address.
        var address: IPAddress
        /// The names and wildcards on the line.
        package var patterns: [HostPattern]
        /// The 1-based line number.
        var line: Int
    }

    /// Lines longer than this many bytes are rejected.
    static let maximumLineLength = 65_536
    /// Files larger than this many bytes are not read.
    static let maximumFileSize = 256 << 20

    /// The file's path as it was given (for diagnostics).
    var file: String
    /// The good lines, in file order.
    package var entries: [Entry]
    /// The problems, in file order.
    public var diagnostics: [ConfigDiagnostic]

    /// Whether any diagnostic is an error.
    var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }

    /// The overrides of the good lines.
    @_spi(Benchmarks) public var table: OverrideTable {
        OverrideTable(entries.lazy.flatMap { entry in entry.patterns.lazy.map { ($0, [entry.address]) } })
    }

    /// Parses `bytes`; `file` names the source in diagnostics.
    public init(parsing bytes: [UInt8], file: String = "<memory>") {
        self.file = file
        var entries: [Entry] = []
        var diagnostics: [ConfigDiagnostic] = []
        bytes.withUnsafeBufferPointer { buffer in
            var lineStart = 0
            var lineNumber = 0
            while lineStart < buffer.count {
                lineNumber += 1
                var lineEnd = lineStart
                while lineEnd < buffer.count, buffer[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
                let next = lineEnd + 1
                if lineEnd > lineStart, buffer[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                let line = UnsafeBufferPointer(rebasing: buffer[lineStart..<lineEnd])
                switch Self.parseLine(line, number: lineNumber, file: file) {
                case .entry(let entry): entries.append(entry)
                case .problems(let problems): diagnostics += problems
                case .entryWithProblems(let entry, let problems):
                    entries.append(entry)
                    diagnostics += problems
                case .empty: break
                }
                lineStart = next
            }
        }
        self.entries = entries
        self.diagnostics = diagnostics
    }

    /// Reads and parses the file at `path`.
    /// - Throws: `HTTPDNSError` with `HTTPDNSError.Code.invalidConfiguration` when the file cannot be read.
    ///   Bad lines do not throw; they are in ``diagnostics``.
    public init(contentsOf path: String) throws(HTTPDNSError) {
        self.init(parsing: try FileBytes.contents(of: path), file: path)
    }

    private enum LineResult {
        case empty
        case entry(Entry)
        case entryWithProblems(Entry, [ConfigDiagnostic])
        case problems([ConfigDiagnostic])
    }

    private static func parseLine(_ line: UnsafeBufferPointer<UInt8>, number: Int, file: String) -> LineResult {
        func problem(_ column: Int, _ message: String) -> ConfigDiagnostic {
            ConfigDiagnostic(file: file, line: number, column: column, message: message)
        }
        guard line.count <= maximumLineLength else {
            return .problems([problem(0, "line is \(line.count) bytes long; at most \(maximumLineLength) are allowed")])
        }
        // Fields: runs of bytes other than space and tab, up to a '#'. The first is the address, the rest names.
        var address: IPAddress?
        var patterns: [HostPattern] = []
        var problems: [ConfigDiagnostic] = []
        var index = 0
        while index < line.count {
            let byte = line[index]
            if byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                index += 1
                continue
            }
            let start = index
            while index < line.count, line[index] != UInt8(ascii: " "), line[index] != UInt8(ascii: "\t"),
                line[index] != UInt8(ascii: "#")
            {
                index += 1
            }
            let field = UnsafeBufferPointer(rebasing: line[start..<index])
            let column = start + 1
            if let bad = byteProblem(field, line: line) {
                return .problems([problem(column + bad.offset, bad.message)])
            }
            guard address != nil else {
                guard let ip = IPAddress(literalBytes: field) else {
                    let text = String(decoding: field, as: UTF8.self)
                    let hint = text.contains("%") ? " (zone identifiers are not supported)" : ""
                    return .problems([
                        problem(column, "'\(HostName.printable(text))' is not an IPv4 or IPv6 address\(hint)")
                    ])
                }
                address = ip
                continue
            }
            do {
                patterns.append(try HostPattern(utf8: field))
            } catch {
                problems.append(problem(column, error.message))
            }
        }
        guard let address else { return .empty }
        if patterns.isEmpty && problems.isEmpty {
            return .problems([
                problem(
                    1 + (line.firstIndex { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") } ?? 0),
                    "no host name after the address \(address)")
            ])
        }
        let entry = Entry(address: address, patterns: patterns, line: number)
        if problems.isEmpty { return .entry(entry) }
        return patterns.isEmpty ? .problems(problems) : .entryWithProblems(entry, problems)
    }

    /// NUL and other control bytes, and bytes that are not ASCII, with what to say about them.
    private static func byteProblem(
        _ field: UnsafeBufferPointer<UInt8>,
        line: UnsafeBufferPointer<UInt8>
    ) -> (offset: Int, message: String)? {
        for (offset, byte) in field.enumerated() {
            switch byte {
            case 0:
                return (offset, "NUL byte")
            case 1..<0x20, 0x7F:
                return (offset, "control character 0x\(String(byte, radix: 16))")
            case 0x80...:
                if String(validating: line, as: UTF8.self) == nil {
                    return (offset, "invalid UTF-8")
                }
                return (offset, "non-ASCII character; write internationalised names in punycode (xn--...)")
            default:
                continue
            }
        }
        return nil
    }
}

/// Reads whole files with a size cap.
package enum FileBytes {
    package static func contents(of path: String, limit: Int = HostsFile.maximumFileSize) throws(HTTPDNSError)
        -> [UInt8]
    {
        func fail(_ reason: String) -> HTTPDNSError {
            HTTPDNSError(code: .invalidConfiguration, message: "\(path): \(reason)")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fail(String(cString: strerror(errno))) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw fail(String(cString: strerror(errno))) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw fail("not a regular file") }
        guard Int(info.st_size) <= limit else { throw fail("file is larger than \(limit) bytes") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            filled += count
        }
        return Array(bytes.prefix(filled))
    }
}
