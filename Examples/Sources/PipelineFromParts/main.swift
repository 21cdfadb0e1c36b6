// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import Logging

// From parts: any HostNameResolver can be an upstream; tests use fakes, apps use CAresResolver/HTTPDNSResolver.
let cares = try CAresResolver()
var pipeline = HostResolver.Configuration()  // race mode, probing, persistence: the parts are given below
pipeline.probe = .init(ports: [443])
pipeline.preResolve = ["api.example.com"]
pipeline.cachePath = HostCache.defaultPath()
let resolver = HostResolver(
    upstreams: [.init(name: "cares", kind: .cares, resolver: cares)],
    overrides: HostOverrides(file: try HostsFile(contentsOf: "Config/hosts")),
    cache: HostCache(configuration: .init(minimumTTL: 30, maximumStaleness: .seconds(3600), dualStack: .fastest)),
    configuration: pipeline,
    logger: Logger(label: "httpdns"),
    onShutdown: [{ cares.shutdown() }]
)
