// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import Logging

let logger = Logger(label: "httpdns")

// Each resolver keeps its connections open for reuse (HTTP/2 over TLS when the server offers it).
let doh = try HTTPDNSResolver(
    configuration: .init(
        name: "cloudflare",                               // the `source` of its answers
        api: .dnsMessage(method: .get),
        endpoints: [
            // The endpoint's own name is never resolved: connections go to the bootstrap IPs in turn,
            // while SNI and the certificate check use cloudflare-dns.com.
            try HTTPDNSEndpoint("https://cloudflare-dns.com/dns-query",
                                bootstrapAddresses: [IPAddress("1.1.1.1")!, IPAddress("1.0.0.1")!]),
        ],
        budget: .seconds(3)                               // one lookup, across every endpoint and address
    ),
    transportConfiguration: .init(                        // its connections (several resolvers can share one
        requestTimeout: .seconds(2),                      //   HTTPDNSTransport): one exchange, head to last byte
        additionalTrustRoots: ["/etc/my-company/ca.pem"]  // optional: extra CAs; verification is never turned off
    ),
    logger: logger                                        // optional; secrets never reach it
)
let answer = try await doh.resolve("api.example.com", family: .any)   // source "cloudflare"

// Many names in one call (pre-resolution): one batch of HTTP/2 streams, 100 open at once, one result per name.
let hosts = try ["api.example.com", "cdn.example.com", "img.example.com"].map { try HostName($0) }
for result in try await doh.resolveAll(hosts, family: .ipv4, maximumInFlight: 100) {
    print((try? result.get().addresses.map(\.ip)) ?? [])
}

// A vendor API; the secret comes from the environment, never from code or the command line.
let vendor = try HTTPDNSResolver(
    configuration: .init(
        api: .alibaba(account: "139450", secret: HTTPDNSSecret(environmentVariable: "HOSTSCTL_HTTPDNS_SECRET")),
        endpoints: [try HTTPDNSEndpoint("http://203.107.1.1")]  // plain http only when a URL says so
    )
)

await doh.shutdown()      // closes its connections
await vendor.shutdown()
