// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import Logging

// From parts: any HostNameResolver can be an upstream; tests use fakes, apps use CAresResolver/HTTPDNSResolver.
let cares = try CAresResolver()
let resolver = HostResolver(
    upstreams: [.init(name: "cares", kind: .cares, resolver: cares)],
    overrides: HostOverrides(file: try HostsFile(contentsOf: "Config/hosts")),
    cache: HostCache(configuration: .init(minimumTTL: 30, maximumStaleness: .seconds(3600), dualStack: .fastest)),
    configuration: .init(race: false, probing: .init(ports: [443]), preResolve: ["api.example.com"],
                         cachePath: HostCache.defaultPath()),
    logger: Logger(label: "httpdns"),
    onShutdown: [{ cares.shutdown() }]
)
