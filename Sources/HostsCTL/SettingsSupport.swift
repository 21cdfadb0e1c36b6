import Foundation
import HTTPDNS

/// Finds and loads the settings for a command.
enum SettingsLoading {
    /// The environment variable naming a settings file when `--config` is not given.
    static let configVariable = "HOSTSCTL_CONFIG"

    /// Loads `path`, or the file `$HOSTSCTL_CONFIG` names, or the defaults with environment overrides.
    static func load(_ path: String?) -> SettingsFile {
        let environment = ProcessInfo.processInfo.environment
        let chosen = path ?? environment[configVariable].flatMap { $0.isEmpty ? nil : $0 }
        return SettingsFile.load(path: chosen, environment: environment)
    }
}

/// The rows of `hostsctl config show`.
enum SettingsReport {
    struct Row {
        var key: String
        var value: String
        var origin: String
    }

    static func rows(_ settings: ResolverSettings, file: SettingsFile) -> [Row] {
        var rows: [Row] = []
        func add(_ key: String, _ value: String) {
            let origin =
                file.environmentOverrides[key] != nil
                ? "env \(SettingKey.environmentVariable(for: key))"
                : file.fileKeys[key] != nil ? "file" : "default"
            rows.append(Row(key: key, value: value, origin: origin))
        }
        func list(_ values: [String]) -> String { "[" + values.joined(separator: ", ") + "]" }
        add("sources.order", list(settings.sources.map(\.rawValue)))
        add("sources.race", "\(settings.race)")
        add("overrides.file", settings.overridesFile ?? "none")
        add("overrides.ttl", "\(settings.overridesTTL)")
        add("reload.intervalMs", "\(settings.reloadIntervalMilliseconds)")
        add(
            "cares.servers",
            settings.caresServers.isEmpty ? "[] (system)" : list(settings.caresServers.map(\.description)))
        add("cares.timeoutMs", "\(settings.caresTimeoutMilliseconds)")
        add("cares.tries", "\(settings.caresTries)")
        add("cares.tcp", "\(settings.caresTCP)")
        add("httpdns.providers", list(settings.providers.map(\.name)))
        add("httpdns.timeoutMs", "\(settings.httpTimeoutMilliseconds)")
        add("httpdns.trustCA", list(settings.trustCA))
        for provider in settings.providers {
            let prefix = "httpdns.provider.\(provider.name)."
            add(prefix + "api", provider.api)
            add(prefix + "urls", list(provider.urls))
            add(prefix + "bootstrap", list(provider.bootstrap.map(\.description)))
            add(prefix + "method", provider.method.rawValue)
            add(prefix + "account", provider.account ?? "none")
            add(prefix + "secretEnv", provider.secretVariable)
            let isSet = HTTPDNSSecret(environmentVariable: provider.secretVariable) != nil
            rows.append(
                Row(
                    key: prefix + "secret", value: isSet ? "******** (set)" : "(not set)",
                    origin: "env \(provider.secretVariable)"))
            add(prefix + "allowPrivateAnswers", "\(provider.allowPrivateAnswers)")
        }
        add("guard.allowPrivateAnswers", "\(settings.allowPrivateAnswers)")
        add("cache.enabled", "\(settings.cacheEnabled)")
        add("cache.minTtlSeconds", "\(settings.cacheMinTTL)")
        add("cache.maxTtlSeconds", "\(settings.cacheMaxTTL)")
        add("cache.negativeTtlSeconds", "\(settings.cacheNegativeTTL)")
        add("cache.maxStaleSeconds", "\(settings.cacheMaxStale)")
        add("cache.path", settings.cachePath ?? "default")
        add("cache.maxHosts", "\(settings.cacheMaxHosts)")
        add("cache.preResolve", list(settings.preResolve))
        add("probe.enabled", "\(settings.probeEnabled)")
        add("probe.ports", list(settings.probePorts.map(String.init)))
        add("probe.intervalSeconds", "\(settings.probeIntervalSeconds)")
        add("probe.timeoutMs", "\(settings.probeTimeoutMilliseconds)")
        add("dualStack.policy", settings.dualStack.rawValue)
        add("interception.include", list(settings.interceptInclude.map(\.description)))
        add("interception.exclude", list(settings.interceptExclude.map(\.description)))
        return rows
    }
}
