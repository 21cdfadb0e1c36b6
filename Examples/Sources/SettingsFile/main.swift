// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import HTTPDNSSettings
import Logging

let logger = Logger(label: "httpdns")
let file = SettingsFile.load(path: "Config/hostsctl.json")     // file + HOSTSCTL_ environment
for problem in file.diagnostics { print(problem) }              // Config/hostsctl.json:7:14: error: unknown key ...
var settings = try file.get().resolver                          // throws HTTPDNSError when there are errors

// One section on its own: c-ares configured from the same file, without the rest of the pipeline.
let cares = try CAresResolver(configuration: settings.cares, logger: logger)

// A resolver built from settings follows edits of its overrides and hosts files (every reload.intervalMs; an
// edit with a bad line is rejected whole) and takes edited settings while it runs.
let resolver = try HostResolver(configuration: settings, logger: logger)
settings.cares.timeout = .milliseconds(500)
try resolver.apply(settings)
// HTTPDNSRuntime.start(configurationFile:) (product HTTPDNSURLProtocol) also watches the settings file itself:
// a broken edit keeps the last good settings and logs the error with its position.
