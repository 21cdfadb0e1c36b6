public import Configuration
import GRPCCore
public import GRPCNIOTransportHTTP2Posix
public import HTTPDNS

extension NameResolvers.HTTPDNS.Configuration {
    /// Reads the `grpc` section (`loadBalancing`, `updateIntervalMs`, `reorderPercent`, `family`) from `config`, a
    /// reader scoped to it; missing keys take their defaults. A service config with method configs (retries,
    /// timeouts) is set in code, on ``serviceConfig``; `loadBalancing` then replaces its policy.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
    }

    /// The defaults with the `grpc` section of the settings `settings` were read from (the file, or the reader given
    /// to `HostResolver.Configuration(configReader:)`).
    /// - Throws: `HTTPDNSError` for an unknown `grpc` key or a bad value, with its position in the settings file.
    public init(settings: HostResolver.Configuration) throws(HTTPDNSError) {
        self = try settings.read(Self.section)
    }

    /// The section of the settings file these keys live in, which errors name.
    static let scope = "grpc"

    /// The `grpc` section: the resolver's loader keeps it for this module, which checks and reads it. `hostsctl`,
    /// which does not link gRPC, leaves it unchecked.
    static let section = SettingsSection(scope, fields: fields, read: Self.init(configReader:))

    /// The load-balancing policies the endpoint lists are shaped for.
    enum Balancing: String, CaseIterable, Sendable {
        case pickFirst, roundRobin
    }

    /// The policy, as the service config says it.
    var balancing: Balancing {
        get { isRoundRobin ? .roundRobin : .pickFirst }
        set {
            serviceConfig.loadBalancingConfig =
                newValue == .roundRobin ? [.roundRobin] : [.pickFirst(shuffleAddressList: false)]
        }
    }

    /// ``reorderThreshold`` in whole percent.
    var reorderPercent: Int {
        get { Int((reorderThreshold * 100).rounded()) }
        set { reorderThreshold = Double(min(max(newValue, 0), 100)) / 100 }
    }

    /// The `grpc` keys, bound to the properties they set.
    static let fields: [SettingField<Self>] = [
        .choice(
            "loadBalancing", \.balancing, default: .pickFirst,
            "pickFirst: every address in rank order in one endpoint; roundRobin: an endpoint per address"),
        .milliseconds(
            "updateIntervalMs", \.updateInterval, default: 1000,
            "how often the ranking is looked at, and the least time between two pushed endpoint lists",
            range: 10...3_600_000),
        .int(
            "reorderPercent", \.reorderPercent, default: 20,
            "how much better (percent of its score) another address must be before pick-first moves to it",
            range: 0...100),
        .choice("family", \.family, default: .any, "address families asked for"),
    ]
}
