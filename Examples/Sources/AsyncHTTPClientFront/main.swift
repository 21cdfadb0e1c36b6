// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
// Package.swift: .product(name: "HTTPDNSURLProtocol", package: "swift-httpdns"),
//                .product(name: "AsyncHTTPClient", package: "async-http-client")
import AsyncHTTPClient
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSURLProtocol

// The same pipeline as the URL protocol's: overrides, system hosts, scored cache, HTTP DNS, c-ares.
let settings = try SettingsFile.load(path: "Config/hostsctl.json").get()
let resolver = try HostResolver(configuration: settings.resolver)
let interception = try settings.read(HTTPDNSInterceptor.Configuration.section)   // the `interception` keys
let client = try HTTPDNSClient(resolver: resolver, configuration: interception.connection)

// Where the code said `httpClient.execute(request, timeout: ...)`: the same request and response types.
// TCP goes to the fastest IP of api.example.com; Host, SNI and the certificate check stay api.example.com.
var request = HTTPClientRequest(url: "https://api.example.com/v1/items")
request.headers.add(name: "Accept", value: "application/json")
let response = try await client.execute(request, timeout: .seconds(30))
print(response.status)

// The body streams as it arrives (back-pressure, never buffered whole); the timeout covers it too.
var received = 0
for try await part in response.body {
    received += part.readableBytes
}
print("\(received) bytes")

// Closes the pinned connections; the resolver saves its cache.
await client.shutdown()
await resolver.shutdown()
