// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
// Package.swift: .product(name: "HTTPDNSURLProtocol", package: "swift-httpdns")
import Foundation
import FoundationNetworking
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSURLProtocol

// At start-up, BEFORE anything creates a URLSession (URLSession.shared copies the registered classes on first use).
let settings = try SettingsFile.load(path: "Config/hostsctl.json").get()
let resolver = try HostResolver(configuration: settings.resolver)
let interceptor = try HTTPDNSInterceptor(
    resolver: resolver,
    configuration: try settings.read(HTTPDNSInterceptor.Configuration.section)   // interception.include/exclude/...
)
HTTPDNSURLProtocol.register(interceptor)

// Unchanged application code: the request goes to the fastest IP of api.example.com, with
// "Host: api.example.com", SNI api.example.com and the certificate checked for api.example.com.
let (data, response) = try await URLSession.shared.data(from: URL(string: "https://api.example.com/v1/items")!)
print((response as! HTTPURLResponse).url!)   // https://api.example.com/v1/items — the real host, never the IP

// A session with its own configuration never sees global registrations: insert the protocol first (with another
// interceptor, the session gets its own and the process's stays).
let configuration = URLSessionConfiguration.default
HTTPDNSURLProtocol.install(interceptor, into: configuration)
let session = URLSession(configuration: configuration)

// Keep one request away from rewriting, or stop interception altogether:
var request = URLRequest(url: URL(string: "https://api.example.com/raw")!)
HTTPDNSURLProtocol.markHandled(&request)
HTTPDNSURLProtocol.unregister()
