import Foundation
import Logging

/// The logger hostsctl hands to the library: standard error, warnings and up unless `HOSTSCTL_LOG_LEVEL` says
/// otherwise (trace, debug, info, notice, warning, error, critical). The tool, not the library, picks the handler.
enum CommandLogging {
    static let levelVariable = "HOSTSCTL_LOG_LEVEL"

    static func logger() -> Logger {
        var logger = Logger(label: "hostsctl", factory: { StreamLogHandler.standardError(label: $0) })
        let text = ProcessInfo.processInfo.environment[levelVariable]?.lowercased() ?? ""
        logger.logLevel = Logger.Level(rawValue: text) ?? .warning
        return logger
    }
}
