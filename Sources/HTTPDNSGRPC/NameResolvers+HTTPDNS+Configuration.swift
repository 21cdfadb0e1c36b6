public import Configuration
import GRPCCore
public import GRPCNIOTransportHTTP2Posix
public import HTTPDNS
public import HTTPDNSSettings

extension NameResolvers.HTTPDNS.Configuration {
    /// Reads the `grpc` section (`loadBalancing`, `updateIntervalMs`, `reorderPercent`, `family`) from `config`, a
    /// reader scoped to it; missing keys take their defaults. A service config with method configs (retries,
    /// timeouts) is set in code, on ``serviceConfig``; `loadBalancing` then replaces its policy.
    /// - Throws: `HTTPDNSError.Code.invalidConfiguration` naming the key for a bad value.
    public init(configReader config: ConfigReader) throws(HTTPDNSError) {
        self.init()
        try SettingField.readAll(Self.fields, from: config, scope: Self.scope, into: &self)
    }

    /// The section of the settings file these keys live in, which errors name.
    static let scope = "grpc"

    /// The `grpc` section of a settings file: `Settings.read(_:)` checks it against these keys and reads it.
    /// `hostsctl`, which does not link gRPC, leaves it unchecked.
    public static let section = SettingsSection(scope, fields: fields, read: Self.init(configReader:))

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
