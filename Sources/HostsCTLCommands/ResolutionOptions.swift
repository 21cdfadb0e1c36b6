import ArgumentParser
import Foundation
import HTTPDNS
import HTTPDNSSettings

/// The options that say how names are resolved, shared by `resolve` and `bench`: servers, family, timeouts, the
/// settings and overrides files, and an HTTP DNS service.
struct ResolutionOptions: ParsableArguments {
    /// The DNS servers; the system's when none is given.
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp(
            "DNS server as IP[:PORT] or [IPv6]:PORT; repeatable. Default: /etc/resolv.conf.", valueName: "IP[:PORT]"),
        transform: { try ServerAddress(parsing: $0) }
    )
    var servers: [ServerAddress] = []

    /// Which address family to ask for; each command has its own default.
    @Option(help: "Address family: ipv4, ipv6 or any (A and AAAA).", transform: ResolutionOptions.parseFamily)
    var family: AddressFamily?

    /// Seconds to wait: c-ares's first try, or an HTTP DNS lookup's whole budget.
    @Option(
        help: """
            c-ares: seconds to wait for an answer on the first try; c-ares doubles it on each later round, so a \
            lookup may take up to TIMEOUT x (2^tries - 1). HTTP DNS: the whole lookup's budget across the \
            endpoints and bootstrap addresses (and the most one exchange may take).
            """
    )
    var timeout: Double?

    /// How many tries per query.
    @Option(help: "How many times each query is sent before it times out (default 2).")
    var tries: Int?

    /// The settings file.
    @Option(help: SettingsLoading.configHelp)
    var config: String?

    /// An overrides file in hosts format; its names are answered from it with source `override`.
    @Option(help: SettingsLoading.hostsHelp)
    var hosts: String?

    /// An HTTP DNS service to resolve through instead of the configured upstreams.
    @OptionGroup(title: "HTTP DNS")
    var httpDNS: HTTPDNSOptions

    /// Creates the options (used by the argument parser).
    init() {}

    /// Checks the ranges and the combinations these options allow.
    func validate() throws {
        if let timeout, !(timeout.isFinite && timeout >= 0.001 && timeout <= 3600) {
            throw ValidationError("--timeout must be between 0.001 and 3600 seconds.")
        }
        if let tries, !(1...16).contains(tries) { throw ValidationError("--tries must be between 1 and 16.") }
        if httpDNS.isSelected, !servers.isEmpty {
            throw ValidationError("--server is for c-ares; it cannot be combined with HTTP DNS options.")
        }
    }

    /// Whether the command line names the upstream to ask (`--server`, `--doh`, `--httpdns`, `--provider`): then
    /// only that upstream answers, and cached answers another upstream gave are not served.
    var namesUpstream: Bool { !servers.isEmpty || httpDNS.isSelected }

    /// Keeps `resolver` to the upstream the command line named, if it named one: cached answers from other
    /// upstreams are not served.
    func restrictCache(of resolver: HostResolver) {
        guard namesUpstream else { return }
        resolver.updatePolicy { $0.servesAnswersFromOtherUpstreams = false }
    }

    /// Loads the settings file (diagnostics go to standard error) and applies these options to it.
    /// - Throws: `ValidationError` when the settings have errors.
    func loadSettings() throws -> HostResolver.Configuration {
        apply(to: try SettingsLoading.settings(config).resolver)
    }

    /// Reports the bad lines of the overrides file the final settings use, if they use one.
    /// - Throws: `ValidationError` when that file cannot be read.
    static func checkOverrides(_ settings: HostResolver.Configuration) throws {
        if let path = settings.files.overridesFile, settings.sources.contains(.overrides) {
            try reportOverrideProblems(path)
        }
    }

    /// `settings` with these options applied; the pipeline is made static (no reloads, no pre-resolution).
    func apply(to loaded: HostResolver.Configuration) -> HostResolver.Configuration {
        var settings = loaded
        if let hosts {
            SettingsLoading.useOverrides(hosts, in: &settings)
        }
        if !servers.isEmpty { settings.cares.servers = servers }
        if let timeout {
            let limit = Duration.milliseconds(Int((timeout * 1000).rounded(.up)))
            settings.cares.timeout = limit
            settings.httpDNSTransport.requestTimeout = limit
            settings.httpDNSBudget = limit
        }
        if let tries { settings.cares.tries = tries }
        settings.httpDNSTransport.additionalTrustRoots += httpDNS.trustCA
        // An upstream named on the command line answers alone: no system-resolver fallback behind it.
        if namesUpstream { settings.systemFallback = false }
        settings.files.reloadIntervalMilliseconds = 0
        settings.preResolve = []
        return settings
    }

    /// Builds the HTTP DNS service the options name, if any, and makes it the pipeline's only upstream: `settings`
    /// gets the `httpdns` layer and loses `cares`. The caller shuts the transport down.
    /// - Returns: The upstreams to give ``HostResolver`` (`nil`: the settings' own) and the transport.
    func commandLineUpstreams(_ settings: inout HostResolver.Configuration) throws -> (
        upstreams: [HostResolver.Upstream]?, transport: HTTPDNSTransport?
    ) {
        guard httpDNS.isSelected else { return (nil, nil) }
        let (resolver, transport) = try httpDNS.makeResolver(
            timeout: settings.httpDNSTransport.requestTimeout, budget: settings.httpDNSBudget)
        settings.sources.removeAll { $0 == .cares }
        if !settings.sources.contains(.httpdns) { settings.sources.append(.httpdns) }
        let identity =
            "\(resolver.configuration.name)(\(resolver.configuration.endpoints.map(\.url).joined(separator: ",")))"
        let api = resolver.configuration.api.description
        let upstream = HostResolver.Upstream(
            name: resolver.configuration.name, kind: .httpDNS, resolver: resolver, identity: identity,
            negativeAnswersAreAuthoritative: api == "doh" || api == "doh-json")
        return ([upstream], transport)
    }

    /// Checks that an overrides file can be read (an unreadable file is a usage error). Its bad lines are skipped
    /// and reported once, as warnings, by the resolver that loads it.
    static func reportOverrideProblems(_ path: String) throws {
        do {
            _ = try HostsFile(contentsOf: path)
        } catch {
            throw ValidationError(error.message)
        }
    }

    static func parseFamily(_ text: String) throws -> AddressFamily {
        guard let family = AddressFamily(rawValue: text.lowercased()) else {
            throw ValidationError("'\(text)' is not a family; use ipv4, ipv6 or any.")
        }
        return family
    }
}

/// `--cache-file` and `--no-cache`, shared by the commands that run the pipeline.
struct CacheOptions: ParsableArguments {
    /// The persisted cache file.
    @Option(
        name: .customLong("cache-file"),
        help: ArgumentHelp(
            "The persisted IP cache. Default: cache.path, else $XDG_CACHE_HOME/hostsctl/cache.json.", valueName: "PATH")
    )
    var cacheFile: String?

    /// Turn the cache off.
    @Flag(name: .customLong("no-cache"), help: "Do not read or write the IP cache.")
    var noCache = false

    /// Creates the options (used by the argument parser).
    init() {}

    /// Refuses the contradiction.
    func validate() throws {
        if noCache, cacheFile != nil { throw ValidationError("--no-cache and --cache-file contradict each other.") }
    }

    /// Turns the cache off, or points it at the file.
    func apply(to settings: inout HostResolver.Configuration) {
        if noCache { settings.cacheEnabled = false }
        if let cacheFile { settings.cachePath = cacheFile }
    }
}
