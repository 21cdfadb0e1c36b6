public import HTTPDNS

extension HostResolver.Configuration {
    /// The configuration of a resolver made from its parts, with the knobs tests turn most: the defaults but for
    /// the arguments given, and no search domains unless given (not the machine's, so that tests read the same
    /// everywhere).
    public static func parts(
        race: Bool = false, probing: HostResolver.Probing? = HostResolver.Probing(), preResolve: [String] = [],
        cachePath: String? = nil, saveInterval: Duration = .seconds(300), search: [String] = [], ndots: Int = 1
    ) -> Self {
        var configuration = HostResolver.Configuration()
        configuration.race = race
        configuration.probeEnabled = probing != nil
        if let probing { configuration.probe = probing }
        configuration.preResolve = preResolve
        configuration.cachePath = cachePath
        configuration.cacheSaveInterval = saveInterval
        configuration.cares.searchDomains = search
        configuration.cares.ndots = ndots
        return configuration
    }
}
