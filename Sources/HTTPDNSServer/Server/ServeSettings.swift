import HTTPDNS
public import HTTPDNSSettings

/// The `serve` section of a settings file as `hostsctl serve` reads it: the listener's configuration and the
/// service's, each read by its own `init(configReader:)` from the one section, their keys listed together (the
/// listener's first). An application that embeds the server reads it from a settings file with
/// `try settings.read(ServeSettings.section)`.
public struct ServeSettings: Sendable, Hashable {
    /// Where and how the server listens.
    public var server: HTTPDNSServer.Configuration
    /// What the service answers and how.
    public var service: HTTPDNSService.Configuration

    /// The two configurations.
    package init(server: HTTPDNSServer.Configuration, service: HTTPDNSService.Configuration) {
        self.server = server
        self.service = service
    }

    /// The `serve` section.
    public static let section = SettingsSection<ServeSettings>(
        "serve",
        fields: HTTPDNSServer.Configuration.fields.map { $0.lifted(\ServeSettings.server) }
            + HTTPDNSService.Configuration.fields.map { $0.lifted(\ServeSettings.service) },
        read: { config throws(HTTPDNSError) in
            ServeSettings(server: try .init(configReader: config), service: try .init(configReader: config))
        })

    /// What a settings file without a `serve` section gives.
    package static var `default`: ServeSettings {
        // An empty reader gives every default; it cannot fail.
        try! ServeSettings(
            server: .init(configReader: defaultsReader), service: .init(configReader: defaultsReader))
    }
}
