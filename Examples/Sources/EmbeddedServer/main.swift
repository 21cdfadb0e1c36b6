// A guide sample, compiled and run by CI (scripts/build-samples.sh, against a local dnsmasq); ReadmeSampleTests
// keeps the texts equal.
import Foundation
import HTTPDNS
import HTTPDNSServer
import Logging

let environment = ProcessInfo.processInfo.environment
let logger = Logger(label: "embedded-dns")

// The pipeline the server answers from, configured in code: the scored cache in front of c-ares.
var settings = HostResolver.Configuration()
settings.sources = [.overrides, .cache, .cares]
settings.cares.servers = [try ServerAddress(parsing: environment["DNS_SERVER"] ?? "10.0.0.53:53")]
settings.probeEnabled = false
let resolver = try HostResolver(configuration: settings, logger: logger, persistingCache: false)

// What the service answers: at most 4 addresses an answer, no client subnet sent upstream.
var answering = HTTPDNSService.Configuration()
answering.maximumAnswers = 4
answering.clientSubnetMode = .off
let service = HTTPDNSService(resolver: resolver, configuration: answering, logger: logger)

// Where it listens: plain HTTP on a free loopback port here (DoH, the JSON API, the vendor APIs); set
// certificatePath and privateKeyPath for TLS and HTTP/2, dnsListen and dotListen for plain DNS and DNS over TLS.
var listening = HTTPDNSServer.Configuration()
listening.port = 0
let server = try await HTTPDNSServer.start(service: service, configuration: listening, logger: logger)
print("DoH on http://127.0.0.1:\(server.port)/dns-query")

// Any DoH client can ask it; here the library's own (RFC 8484 GET).
let client = try HTTPDNSResolver(
    configuration: .init(
        api: .dnsMessage(),
        endpoints: [try HTTPDNSEndpoint("http://127.0.0.1:\(server.port)/dns-query")],
        allowNonPublicAddresses: true))
let answer = try await client.resolve("www.example.test", family: .ipv4)
print("www.example.test", answer.addresses.map(\.ip))

await client.shutdown()
await server.shutdown()                                  // stops listening, lets requests in progress finish
await resolver.shutdown()
