import Foundation
package import HTTPDNS
import Logging
import Synchronization

/// What the admin listener's control calls reach beyond the service, given by the program that runs the server
/// (`hostsctl serve`): its version, its settings file, and a way to reload that file now.
package struct ServiceControl: Sendable {
    /// The program's version.
    package var version: String
    /// The settings file the server reads, `nil` for none (the defaults).
    package var settingsFile: String?
    /// Reloads the settings now and says how it went; `nil` when the server has nothing to reload.
    package var reload: (@Sendable () -> ReloadRecord)?
    /// The last reload, whatever asked for it (a file edit, SIGHUP, a control call).
    package var lastReload: @Sendable () -> ReloadRecord?

    package init(
        version: String, settingsFile: String?, reload: (@Sendable () -> ReloadRecord)?,
        lastReload: @escaping @Sendable () -> ReloadRecord?
    ) {
        self.version = version
        self.settingsFile = settingsFile
        self.reload = reload
        self.lastReload = lastReload
    }
}

/// One reload of the settings: when, what asked for it, and whether the new settings are in force.
package struct ReloadRecord: Codable, Sendable, Hashable {
    /// When, seconds since 1970.
    package var time: Double
    /// What asked: `file` (an edit seen), `signal` (SIGHUP) or `control` (`POST /admin/reload`).
    package var trigger: String
    /// Whether the new settings are in force; else the last good ones stay.
    package var applied: Bool
    /// Why they were not applied.
    package var error: String?
    /// Listener settings changed, which take effect at the next start.
    package var restartNeeded: Bool
    /// The settings file had not changed since it was last applied: nothing was rebuilt, the overrides and hosts
    /// files were checked.
    package var unchanged: Bool

    package init(
        time: Double, trigger: String, applied: Bool, error: String?, restartNeeded: Bool, unchanged: Bool = false
    ) {
        self.time = time
        self.trigger = trigger
        self.applied = applied
        self.error = error
        self.restartNeeded = restartNeeded
        self.unchanged = unchanged
    }
}

/// `GET /admin/status`: what is running, since when, with which settings, where it listens and how its upstreams
/// fare.
package struct ServerStatus: Codable, Sendable, Hashable {
    /// One listening socket.
    package struct Listener: Codable, Sendable, Hashable {
        /// `http`, `https`, `dns` (UDP and TCP), `dot` or `admin`.
        package var kind: String
        /// `IP:PORT` (`[IPv6]:PORT`).
        package var address: String

        package init(kind: String, address: String) {
            self.kind = kind
            self.address = address
        }
    }

    /// The program's version (`unknown` for a service embedded without one).
    package var version: String
    /// When the service started, seconds since 1970.
    package var started: Double
    /// Seconds since then.
    package var uptimeSeconds: Double
    /// The settings file, `nil` for none.
    package var settingsFile: String?
    /// The last reload of the settings, `nil` when there was none.
    package var lastReload: ReloadRecord?
    /// Where the server listens.
    package var listeners: [Listener]
    /// Each upstream's state: the resolver's, then the relay of other types.
    package var upstreams: [UpstreamHealth.Record]
    /// Hosts in the resolver's cache.
    package var cachedHosts: Int
}

/// `POST /admin/flush`: what a flush removed.
package struct FlushResult: Codable, Sendable, Hashable {
    /// The name flushed.
    package var name: String
    /// Whether the names under it went too.
    package var subdomains: Bool
    /// Hosts removed from the resolver's cache (answers of both families, negative ones and scores).
    package var cache: Int
    /// Names removed from the answers kept by client network.
    package var clientSubnet: Int
    /// Relayed answers of other types removed.
    package var relayed: Int
}

/// How often the control calls may run: each costs a scan of the caches (a flush), a copy of the upstream table (a
/// status call) or a read of the settings file (a reload, and a rebuild of the upstreams when it changed), so a local
/// process looping on them cannot take a core. One bucket per kind of call, for the whole server: only operators
/// reach the admin listener, whose connections are bounded per client network apart.
struct ControlBudget: Sendable {
    /// A token bucket: `rate` calls a second, bursts of `burst`.
    struct Bucket: Sendable {
        let rate: Double
        let burst: Double
        var tokens: Double
        var updated: ContinuousClock.Instant?

        init(rate: Double, burst: Double) {
            self.rate = rate
            self.burst = burst
            self.tokens = burst
        }

        /// Takes one call at `now`; `false` when none is left.
        mutating func take(now: ContinuousClock.Instant) -> Bool {
            if let updated {
                tokens = min(burst, tokens + max(0, (now - updated) / .seconds(1)) * rate)
            }
            updated = now
            guard tokens >= 1 else { return false }
            tokens -= 1
            return true
        }
    }

    /// Flushes: ten a second.
    static let flushesPerSecond = 10.0
    /// Status calls: ten a second.
    static let statusPerSecond = 10.0

    var reloads = Bucket(rate: 1, burst: 1)
    var flushes = Bucket(rate: flushesPerSecond, burst: flushesPerSecond)
    var status = Bucket(rate: statusPerSecond, burst: statusPerSecond)
}

extension HTTPDNSService {
    /// The control calls, answered on the admin listener only (the front has refused requests from web pages).
    static let controlEndpoints: Set<String> = ["admin/status", "admin/flush", "admin/reload"]

    /// Hands the control calls what the program knows: its version, settings file and reload.
    package func setControl(_ control: ServiceControl) {
        self.control.withLock { $0 = control }
    }

    /// Tells `GET /admin/status` where the server listens.
    func setListeners(_ listeners: [ServerStatus.Listener]) {
        self.listeners.withLock { $0 = listeners }
    }

    /// The answer to a control call: `GET /admin/status`, `POST /admin/flush?name=N` (or `?suffix=S`: the name and
    /// every name under it), `POST /admin/reload`.
    func controlPlan(_ endpoint: String, method: String, target: RequestTarget, now: ContinuousClock.Instant) -> Plan {
        let expected = endpoint == "admin/status" ? "GET" : "POST"
        guard method == expected else {
            return Plan(
                endpoint: endpoint,
                work: .done(
                    .text(
                        405, "\(HostName.printable(method)) is not allowed here; use \(expected)",
                        headers: ["Allow": expected])))
        }
        let response: ServiceResponse
        switch endpoint {
        case "admin/status":
            response =
                controlBudget.withLock({ $0.status.take(now: now) })
                ? Self.json(status()) : Self.overBudget("status calls", perSecond: ControlBudget.statusPerSecond)
        case "admin/flush": response = flushCall(target, now: now)
        default: response = reloadCall(now: now)
        }
        return Plan(endpoint: endpoint, work: .done(response))
    }

    /// What `GET /admin/status` says.
    package func status() -> ServerStatus {
        let control = self.control.withLock { $0 }
        var upstreams = resolver.upstreamHealth
        if forwarder != nil { upstreams += relayHealth.records(known: ["relay"]) }
        return ServerStatus(
            version: control?.version ?? "unknown", started: started.timeIntervalSince1970,
            uptimeSeconds: (Date().timeIntervalSince(started) * 10).rounded() / 10,
            settingsFile: control?.settingsFile, lastReload: control?.lastReload(),
            listeners: listeners.withLock { $0 }, upstreams: upstreams,
            cachedHosts: resolver.cache?.count ?? 0)
    }

    /// Removes `name` (and with `subdomains` every name under it) from every cache of answers: the resolver's
    /// (answers, negative answers and scores), the answers kept by client network and the relayed ones of other
    /// types; the encoded answers kept on the event loops end with them. What the clients reported of the names'
    /// addresses stays (it is measurements, not answers).
    package func flush(_ name: HostName, subdomains: Bool) -> FlushResult {
        let suffix = "." + name.name
        let matches = { (candidate: String) in
            candidate == name.name || (subdomains && candidate.hasSuffix(suffix))
        }
        let cache = resolver.cache?.remove(where: { matches($0.name) }) ?? 0
        let clientSubnet = subnetAnswers.remove(where: matches)
        let relayed = forwardedAnswers.remove(where: matches)
        configurationChanges.add(1, ordering: .releasing)
        logger.notice(
            "flushed", metadata: ["name": "\(name)", "subdomains": "\(subdomains)", "hosts": "\(cache)"])
        return FlushResult(
            name: name.name, subdomains: subdomains, cache: cache, clientSubnet: clientSubnet, relayed: relayed)
    }

    private func flushCall(_ target: RequestTarget, now: ContinuousClock.Instant) -> ServiceResponse {
        let name = target.parameter("name")
        let suffix = target.parameter("suffix")
        guard (name == nil) != (suffix == nil), let text = name ?? suffix, !text.isEmpty else {
            return .text(400, "give one of name=NAME (that name) or suffix=NAME (it and every name under it)")
        }
        guard let host = try? HostName(text) else {
            return .text(400, "'\(HostName.printable(text))' is not a host name")
        }
        guard controlBudget.withLock({ $0.flushes.take(now: now) }) else {
            return Self.overBudget("flushes", perSecond: ControlBudget.flushesPerSecond)
        }
        return Self.json(flush(host, subdomains: suffix != nil))
    }

    private func reloadCall(now: ContinuousClock.Instant) -> ServiceResponse {
        guard let reload = control.withLock({ $0?.reload }) else {
            return .text(404, "this server has no settings to reload")
        }
        guard controlBudget.withLock({ $0.reloads.take(now: now) }) else {
            return Self.overBudget("reloads", perSecond: 1)
        }
        let record = reload()
        return Self.json(record, status: record.applied ? 200 : 422)
    }

    /// 429 for a control call past its budget.
    static func overBudget(_ what: String, perSecond: Double) -> ServiceResponse {
        .text(429, "too many \(what); at most \(Int(perSecond)) a second", headers: ["Retry-After": "1"])
    }

    /// `value` as a JSON answer (keys sorted) that is never cached.
    static func json(_ value: some Encodable, status: Int = 200) -> ServiceResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Strings, finite numbers and collections of them: encoding cannot fail.
        return ServiceResponse(
            status: status, contentType: "application/json", headers: ["Cache-Control": "no-store"],
            body: Array((try? encoder.encode(value)) ?? Data("{}".utf8)))
    }
}
