// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS
import Logging

let logger = Logger(label: "httpdns")
let file = SettingsFile.load(path: "Config/hostsctl.json")     // file + HOSTSCTL_ environment
for problem in file.diagnostics { print(problem) }              // Config/hostsctl.json:7:14: error: unknown key ...
let settings = try file.get()                                   // throws ConfigurationError when there are errors

// Hot reload: the file is checked every 2 s; a broken edit keeps the last good settings and logs the error.
let watcher = try FileWatcher(path: "Config/hostsctl.json", logger: logger,
                              load: { try SettingsFile.load(path: $0).get() },
                              onChange: { newSettings in /* apply */ })
watcher.start(interval: .milliseconds(settings.files.reloadIntervalMilliseconds))

// The overrides file follows its edits the same way; an edit with a bad line is rejected whole.
let overrides = HostOverrides()
let hostsWatcher = try overrides.watch(path: "Config/hosts", interval: .seconds(2), logger: logger)
