// Package.swift: .product(name: "HTTPDNSURLProtocol", package: "swift-httpdns")
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPDNSURLProtocol

// First thing at start-up, before anything uses URLSession: builds the resolver and the interceptor from the
// settings file, registers the URL protocol and follows the file for edits.
let httpdns = try HTTPDNSRuntime.start(configurationFile: "Config/hostsctl.json")

// Unchanged application code: the request goes to the fastest IP of the host, with its Host header, SNI and
// certificate check for the real name. Names from /etc/hosts, search domains and proxies work as before.
let (data, response) = try await URLSession.shared.data(from: URL(string: "http://vm:8080/")!)
print((response as? HTTPURLResponse)?.statusCode ?? 0, data.count)

try httpdns.setOverride(["127.0.0.1"], for: "api.example.com")  // NSEtcHosts-style, at run time, no file needed
await httpdns.shutdown()  // unregisters the protocol, closes connections, saves the cache
