import Foundation

/// How short names are completed with search domains, the way the system resolver does it (resolv.conf(5)).
///
/// A name with fewer dots than ``ndots`` is tried with each search domain appended first and then as it is; a name
/// with at least ``ndots`` dots is tried as it is first and then with each domain. A name written with a trailing
/// dot (`orders.`) is fully qualified and never searched. Every upstream (c-ares and the HTTP DNS providers alike)
/// is asked for the candidates in this order; the first that has an answer wins and the answer names it.
///
/// ```swift
/// let search = SearchPolicy(domains: ["svc.cluster.local", "cluster.local"], ndots: 5)
/// search.candidates(for: try HostName("orders"))   // orders.svc.cluster.local, orders.cluster.local, orders
/// let system = SearchPolicy.system()               // /etc/resolv.conf, LOCALDOMAIN, RES_OPTIONS
/// ```
package struct SearchPolicy: Sendable, Hashable {
    /// The search domains, in order (at most 6 are kept, as glibc does).
    package var domains: [HostName]
    /// How many dots a name needs to be tried as it is before the search list (0 to 15; glibc's default is 1).
    package var ndots: Int

    /// The most search domains kept.
    static let maximumDomains = 6

    /// No search: every name is asked exactly as given.
    package static let none = SearchPolicy(domains: [HostName](), ndots: 1)

    /// Creates a policy; `ndots` is clamped to 0…15 and the list to ``maximumDomains`` names.
    init(domains: [HostName], ndots: Int = 1) {
        var seen = Set<HostName>()
        self.domains = Array(domains.filter { seen.insert($0).inserted }.prefix(Self.maximumDomains))
        self.ndots = min(max(ndots, 0), 15)
    }

    /// Creates a policy from domain names given as text; names that are not valid host names are skipped.
    package init(domains: [String], ndots: Int = 1) {
        self.init(domains: domains.compactMap { try? HostName($0) }, ndots: ndots)
    }

    /// The names to ask for `name`, in order.
    /// - Parameters:
    ///   - name: The name as the caller gave it.
    ///   - absolute: Whether the name was written with a trailing dot (then it is the only candidate).
    package func candidates(for name: HostName, absolute: Bool = false) -> [HostName] {
        guard !absolute, !domains.isEmpty else { return [name] }
        let dots = name.name.utf8.count { $0 == UInt8(ascii: ".") }
        let searched = domains.compactMap { try? HostName("\(name.name).\($0.name)") }.filter { $0 != name }
        return dots >= ndots ? [name] + searched : searched + [name]
    }

    /// The system's policy: `search`/`domain` and `options ndots:N` from `resolvConf`, then the `LOCALDOMAIN`
    /// (a space-separated domain list) and `RES_OPTIONS` (e.g. `ndots:2`) environment variables, which win.
    /// - Parameters:
    ///   - resolvConf: The resolver configuration file (default `/etc/resolv.conf`); a missing file means no search.
    ///   - environment: Where `LOCALDOMAIN` and `RES_OPTIONS` are read; `nil` for the process's environment.
    package static func system(
        resolvConf: String = "/etc/resolv.conf",
        environment: [String: String]? = nil
    ) -> SearchPolicy {
        let text = (try? String(contentsOfFile: resolvConf, encoding: .utf8)) ?? ""
        return parse(resolvConf: text, environment: environment ?? ProcessInfo.processInfo.environment)
    }

    /// Reads resolv.conf text: the last `search` or `domain` line wins; `options` may set `ndots`; the
    /// environment overrides both.
    static func parse(resolvConf text: String, environment: [String: String]) -> SearchPolicy {
        var domains: [String] = []
        var ndots = 1
        for line in text.split(whereSeparator: \.isNewline) {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let keyword = words.first, !keyword.hasPrefix("#"), !keyword.hasPrefix(";") else { continue }
            let values = words.dropFirst().prefix { !$0.hasPrefix("#") && !$0.hasPrefix(";") }.map(String.init)
            switch keyword {
            case "search": domains = values
            case "domain": domains = Array(values.prefix(1))
            case "options": ndots = Self.ndots(in: values) ?? ndots
            default: continue
            }
        }
        if let local = environment["LOCALDOMAIN"] {
            domains = local.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        }
        if let options = environment["RES_OPTIONS"] {
            ndots = Self.ndots(in: options.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)) ?? ndots
        }
        // "." as a search domain means the root: the name itself, which is always a candidate anyway.
        return SearchPolicy(domains: domains.filter { $0 != "." }, ndots: ndots)
    }

    private static func ndots(in options: [String]) -> Int? {
        var result: Int?
        for option in options where option.hasPrefix("ndots:") {
            if let value = Int(option.dropFirst("ndots:".count)), value >= 0 { result = min(value, 15) }
        }
        return result
    }
}
