// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import HTTPDNSSettings
import Logging

// From Config/hostsctl.json (and HOSTSCTL_... environment variables): the layers of sources.order, the
// overrides file (hot-reloaded), the cache with its limits and file, HTTP DNS providers, c-ares, probing.
let settings = try SettingsFile.load(path: "Config/hostsctl.json").get().resolver
let resolver = try HostResolver(configuration: settings, logger: Logger(label: "httpdns"))

let answer = try await resolver.resolveRanked("api.example.com", port: 443)
for address in answer.addresses {          // best first: fail over down this list
    print(address.rank, address.ip, address.score, address.latencyMilliseconds ?? -1)
}
print(answer.origin, answer.freshness, answer.ttl)   // cares, cache, 287

// Tell the cache what your own connects measured (the URL protocol does this for you):
if let best = answer.best {                // the address to connect to first
    resolver.reportConnect(to: best, of: try HostName("api.example.com"), latency: .milliseconds(12))
    resolver.reportFailure(to: best, of: try HostName("api.example.com"))
}

resolver.networkDidChange()                // Wi-Fi/VPN change: every answer is refreshed on next use
await resolver.shutdown()                  // stops background work, saves the cache, closes upstreams
