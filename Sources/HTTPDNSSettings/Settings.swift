public import Configuration
public import HTTPDNS

/// What a settings file (or any swift-configuration reader) says: the resolver's configuration, and the sections the
/// modules above the resolver own, which they read through ``read(_:)``.
///
/// This module is the one that knows the file's layout: the resolver's keys come from each of its components
/// (`HostResolver.Configuration`), and the other top-level sections (`interception`, `serve`, `grpc`, `otel`) are
/// kept as the file wrote them until their module reads them with its own keys. Load one with
/// ``SettingsFile/load(path:environment:)``, which checks the file with positions.
public struct Settings: Sendable {
    /// The resolver pipeline's configuration: its layers and each component's configuration.
    public var resolver: HostResolver.Configuration
    /// Where these settings were read from; the modules above the resolver read their sections from it.
    var origin: SettingsOrigin

    /// Top-level keys of the settings file that modules above the resolver own: the URL protocol's and
    /// `HTTPDNSClient`'s `interception`, the server's `serve`, the gRPC front's `grpc` and hostsctl's `otel`. The
    /// loader keeps them for those modules instead of calling them unknown.
    static let sectionsOfOtherModules: Set<String> = ["interception", "serve", "grpc", "otel"]

    /// Settings with `resolver` and every other section at its defaults.
    public init(resolver: HostResolver.Configuration = HostResolver.Configuration()) {
        self.resolver = resolver
        self.origin = .reader(defaultsReader)
    }

    /// Settings read from a file: the resolver's configuration and where the other sections are.
    init(resolver: HostResolver.Configuration, origin: SettingsOrigin) {
        self.resolver = resolver
        self.origin = origin
    }

    /// Reads the settings from `config`, a reader of the whole settings (any swift-configuration providers); missing
    /// keys take their defaults.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value of the resolver's.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        resolver = try HostResolver.Configuration(configReader: config)
        origin = .reader(config)
    }

    /// Reads a section another module owns (`HTTPDNSInterceptor.Configuration.section`,
    /// `NameResolvers.HTTPDNS.Configuration.section`, …) from where these settings came from.
    ///
    /// From a file, the section is checked against its keys first (unknown keys, wrong types and values out of
    /// range, with their line and column); its `HOSTSCTL_` variables override the file as they do for every key.
    /// - Throws: `HTTPDNSError` with every problem found.
    public func read<Value>(_ section: SettingsSection<Value>) throws(HTTPDNSError) -> Value {
        switch origin {
        case .reader(let config):
            do {
                return try section.read(config)
            } catch {
                throw HTTPDNSError(
                    code: .invalidConfiguration, message: error.message,
                    diagnostics: [ConfigDiagnostic(file: "settings", line: 0, column: 0, message: error.message)])
            }
        case .file(let sections):
            let checked = sections.check(section.name, keys: section.keys)
            var diagnostics = checked.diagnostics
            if diagnostics.allSatisfy({ $0.severity != .error }) {
                do {
                    return try section.read(checked.reader)
                } catch {
                    diagnostics.append(
                        ConfigDiagnostic(file: sections.path, line: 0, column: 0, message: error.message))
                }
            }
            let errors = diagnostics.filter { $0.severity == .error }.count
            throw HTTPDNSError(
                code: .invalidConfiguration,
                message: "\(sections.path): \(errors) error\(errors == 1 ? "" : "s") in \(section.name)",
                diagnostics: diagnostics)
        }
    }
}
