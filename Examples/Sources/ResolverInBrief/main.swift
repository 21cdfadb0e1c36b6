// A DocC sample (Sources/HTTPDNS/HTTPDNS.docc), compiled by CI; ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import HTTPDNSSettings

let settings = try SettingsFile.load(path: "Config/hostsctl.json").get().resolver
let resolver = try HostResolver(configuration: settings)
let ranked = try await resolver.resolveRanked("api.example.com", port: 443)
print(ranked.addresses.first?.ip as Any)   // the fastest address first
await resolver.shutdown()                        // saves the cache
