// A guide sample, compiled and run by CI (scripts/build-samples.sh, against a local dnsmasq and `hostsctl serve`);
// ReadmeSampleTests keeps the texts equal.
import Foundation
import HTTPDNS

// Every part of the pipeline configured in code: no settings file, no HOSTSCTL_ variable.
let environment = ProcessInfo.processInfo.environment
var configuration = HostResolver.Configuration()          // the defaults every key documents
configuration.sources = [.overrides, .cache, .httpdns, .cares]

// Classic DNS through c-ares, to your own servers instead of resolv.conf's.
configuration.cares.servers = [try ServerAddress(parsing: environment["DNS_SERVER"] ?? "10.0.0.53:53")]
configuration.cares.timeout = .milliseconds(500)

// One HTTP DNS provider (RFC 8484), asked before c-ares; the providers share one set of connections.
configuration.httpDNSProviders = [
    HTTPDNSResolver.Configuration(
        name: "company-doh",                              // the `source` of its answers
        api: .dnsMessage(method: .get),
        endpoints: [try HTTPDNSEndpoint(environment["DOH_URL"] ?? "https://doh.example.net/dns-query")],
        allowNonPublicAddresses: true                     // it answers for internal names
    )
]
configuration.httpDNSTransport.requestTimeout = .seconds(2)
configuration.httpDNSBudget = .seconds(3)                 // per lookup, across endpoints and addresses

// Overrides: a hosts-format file (hot-reloaded) and entries set while running.
configuration.files.overridesFile = environment["OVERRIDES_FILE"]
configuration.systemFallback = false                      // a name nothing here knows fails; getaddrinfo is not asked

configuration.probeEnabled = false                        // no background TCP probes in this sample
let resolver = try HostResolver(configuration: configuration, persistingCache: false)
resolver.overrides?.set([IPAddress("192.0.2.10")!], for: try HostPattern("api.internal.test"))

for name in ["api.internal.test", "www.example.test"] {
    let answer = try await resolver.resolveRanked(name)
    print(name, answer.origin, answer.addresses.map(\.ip))   // api.internal.test override [192.0.2.10]
}
await resolver.shutdown()
