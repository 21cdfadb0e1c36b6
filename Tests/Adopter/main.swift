// httpdns-adopter: an application that adopts the library the way the README shows, with the one-call start-up,
// and then uses URLSession.shared as it always did. The URL protocol tests run it as a child process.
//
//   httpdns-adopter [--config FILE] [--late] [--override HOST=IP]... URL...
//   httpdns-adopter --async-http-client [--config FILE] URL...
//
// --late uses URLSession.shared before starting the library (the mistake the start-up warning is for). Each URL is
// fetched in turn through URLSession.shared; one JSON line per URL: {"url", "status", "body", "error"}. Then one
// line {"cookies": N} with the number of cookies HTTPCookieStorage.shared holds. Logs go to standard error.
// --async-http-client fetches through HTTPDNSClient instead, built as the README's AsyncHTTPClient sample builds it
// (no cookie line). Exits 0 when every URL got an HTTP answer, 1 otherwise, 2 for bad arguments.

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import AsyncHTTPClient
import Foundation
import HTTPDNS
import HTTPDNSSettings
import HTTPDNSURLProtocol
import Logging
import NIOCore
import NIOHTTP1

var arguments = CommandLine.arguments.dropFirst()
var config: String?
var late = false
var asyncHTTPClient = false
var overrides: [(String, String)] = []
var urls: [String] = []
while let argument = arguments.popFirst() {
    switch argument {
    case "--config": config = arguments.popFirst()
    case "--late": late = true
    case "--async-http-client": asyncHTTPClient = true
    case "--override":
        let parts = (arguments.popFirst() ?? "").split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { print("--override HOST=IP"); exit(2) }
        overrides.append((parts[0], parts[1]))
    default: urls.append(argument)
    }
}

if late { _ = URLSession.shared.configuration }
var logger = Logger(label: "adopter", factory: { StreamLogHandler.standardError(label: $0) })
logger.logLevel = .notice

func escape(_ text: String) -> String {
    let data = try! JSONSerialization.data(withJSONObject: [text], options: [])
    return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
}

if asyncHTTPClient {
    // The README's AsyncHTTPClient sample.
    let settings = try SettingsFile.load(path: config).get()
    let resolver = try HostResolver(configuration: settings.resolver, logger: logger)
    let interception = try settings.read(HTTPDNSInterceptor.Configuration.section)
    let client = try HTTPDNSClient(resolver: resolver, configuration: interception.connection)
    var failures = 0
    for url in urls {
        do {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            print(
                #"{"url": \#(escape(url)), "status": \#(response.status.code), "body": \#(escape(String(buffer: body)))}"#
            )
        } catch {
            failures += 1
            print(#"{"url": \#(escape(url)), "error": \#(escape("\(error)"))}"#)
        }
    }
    await client.shutdown()
    await resolver.shutdown()
    exit(failures == 0 ? 0 : 1)
}

// The README's start-up, one call.
let httpdns = try HTTPDNSRuntime.start(configurationFile: config, logger: logger)
for (host, ip) in overrides { try httpdns.setOverride([ip], for: host) }

var failures = 0
for url in urls {
    do {
        let (data, response) = try await URLSession.shared.data(from: URL(string: url)!)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        print(
            #"{"url": \#(escape(url)), "status": \#(status), "body": \#(escape(String(decoding: data, as: UTF8.self)))}"#
        )
    } catch {
        failures += 1
        print(#"{"url": \#(escape(url)), "error": \#(escape("\(error)"))}"#)
    }
}
print(#"{"cookies": \#(HTTPCookieStorage.shared.cookies?.count ?? 0)}"#)
await httpdns.shutdown()
exit(failures == 0 ? 0 : 1)
