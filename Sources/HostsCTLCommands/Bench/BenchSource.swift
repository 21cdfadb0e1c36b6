import ArgumentParser
import HTTPDNS
import Logging

/// A source `hostsctl bench` can measure.
enum BenchSource: Hashable, Sendable, CustomStringConvertible {
    /// The operating system's resolver, `getaddrinfo`.
    case system
    /// c-ares against `--server` (or the configured or system servers).
    case cares
    /// The service named by `--doh`, `--httpdns` or `--provider`, or every configured provider.
    case httpdns
    /// One configured HTTP DNS provider, by name.
    case provider(String)
    /// The whole pipeline with its cache off: every query goes through the overrides to an upstream.
    case pipelineCold
    /// The whole pipeline with its cache filled before the run.
    case pipelineWarm

    /// Parses a `--source` value; any other name is taken as a provider's, checked against the settings later.
    init(argument text: String) throws {
        switch text.lowercased() {
        case "system": self = .system
        case "cares": self = .cares
        case "httpdns": self = .httpdns
        case "pipeline-cold": self = .pipelineCold
        case "pipeline-warm": self = .pipelineWarm
        case "": throw ValidationError("--source needs a name.")
        default: self = .provider(text)
        }
    }

    var description: String {
        switch self {
        case .system: "system"
        case .cares: "cares"
        case .httpdns: "httpdns"
        case .provider(let name): name
        case .pipelineCold: "pipeline-cold"
        case .pipelineWarm: "pipeline-warm"
        }
    }
}

/// Builds the targets for the sources: each one just before its run, so that sources never share sockets,
/// threads or caches, and each one closed right after.
struct BenchTargetFactory {
    /// A target still to build.
    struct Pending {
        var name: String
        var make: () throws -> BenchTarget
    }

    var settings: HostResolver.Configuration
    var options: ResolutionOptions
    var concurrency: Int
    var logger: Logger

    /// The sources measured when none is named: c-ares when servers are given or configured, the HTTP DNS service
    /// of the command line, each configured provider, then the pipeline cold and warm. The system resolver is
    /// measured only when asked for, since its queries cannot be pointed at a server.
    func defaultSources() -> [BenchSource] {
        var sources: [BenchSource] = []
        if !settings.cares.servers.isEmpty { sources.append(.cares) }
        if options.httpDNS.isSelected {
            sources.append(.httpdns)
        } else {
            sources += settings.httpDNSProviders.map { .provider($0.name) }
        }
        return sources + [.pipelineCold, .pipelineWarm]
    }

    /// The targets for `sources`, in order; `httpdns` expands to every configured provider when no HTTP DNS option
    /// is given.
    /// - Throws: `ValidationError` for a provider name the settings do not list, or `httpdns` with no service.
    func pending(_ sources: [BenchSource]) throws -> [Pending] {
        var result: [Pending] = []
        for source in sources {
            switch source {
            case .system:
                result.append(Pending(name: "system", make: system))
            case .cares:
                result.append(Pending(name: "cares", make: cares))
            case .httpdns where options.httpDNS.isSelected:
                result.append(Pending(name: "httpdns", make: commandLineService))
            case .httpdns:
                guard !settings.httpDNSProviders.isEmpty else {
                    throw ValidationError(
                        "--source httpdns needs --doh, --httpdns, --provider or providers in the settings (httpdns.providers)."
                    )
                }
                for provider in settings.httpDNSProviders {
                    result.append(Pending(name: provider.name) { try self.provider(provider) })
                }
            case .provider(let name):
                guard let provider = settings.httpDNSProviders.first(where: { $0.name == name }) else {
                    let known =
                        ["system", "cares", "httpdns", "pipeline-cold", "pipeline-warm"]
                        + settings.httpDNSProviders.map(\.name)
                    throw ValidationError("'\(name)' is not a source; use one of: \(known.joined(separator: ", ")).")
                }
                result.append(Pending(name: name) { try self.provider(provider) })
            case .pipelineCold:
                result.append(Pending(name: "pipeline-cold") { try self.pipeline(warm: false) })
            case .pipelineWarm:
                result.append(Pending(name: "pipeline-warm") { try self.pipeline(warm: true) })
            }
        }
        var seen = Set<String>()
        return result.filter { seen.insert($0.name).inserted }
    }

    private func system() throws -> BenchTarget {
        let resolver = try ResolveCommand.usage { try SystemResolver(threads: min(concurrency, 256)) }
        return BenchTarget(
            name: "system", executor: nil,
            resolve: { host, family in
                _ = try await resolver.resolve(host, family: family)
            }, close: { await resolver.shutdown() })
    }

    private func cares() throws -> BenchTarget {
        let resolver = try ResolveCommand.usage {
            try CAresResolver(configuration: settings.cares, logger: logger)
        }
        return BenchTarget(
            name: "cares", executor: resolver.executor,
            resolve: { host, family in
                _ = try await resolver.resolve(host, family: family)
            }, close: { resolver.shutdown() })
    }

    private func commandLineService() throws -> BenchTarget {
        let (resolver, transport) = try options.httpDNS.makeResolver(
            timeout: settings.httpDNSTransport.requestTimeout)
        return BenchTarget(
            name: "httpdns", executor: nil,
            resolve: { host, family in
                _ = try await resolver.resolve(host, family: family)
            }, close: { await transport.shutdown() })
    }

    private func provider(_ provider: HTTPDNSResolver.Configuration) throws -> BenchTarget {
        try ResolveCommand.usage {
            let transport = try HTTPDNSTransport(configuration: settings.httpDNSTransport)
            do {
                let resolver = try HTTPDNSResolver(configuration: provider, transport: transport, logger: logger)
                return BenchTarget(
                    name: provider.name, executor: nil,
                    resolve: { host, family in
                        _ = try await resolver.resolve(host, family: family)
                    }, close: { await transport.shutdown() })
            } catch {
                Task { await transport.shutdown() }
                throw error
            }
        }
    }

    /// The pipeline the settings describe, with probing off and the cache in memory only (the persisted cache is
    /// neither read nor written); `warm` turns the cache on and fills it before the run.
    private func pipeline(warm: Bool) throws -> BenchTarget {
        var settings = settings
        settings.probeEnabled = false
        settings.cacheEnabled = warm
        if warm, !settings.sources.contains(.cache) {
            settings.sources.insert(.cache, at: settings.sources.first == .overrides ? 1 : 0)
        }
        let (upstreams, transport) = try options.commandLineUpstreams(&settings)
        let resolver: HostResolver
        do {
            resolver = try ResolveCommand.usage {
                try HostResolver(
                    configuration: settings, upstreams: upstreams, prober: nil, logger: logger, persistingCache: false)
            }
        } catch {
            if let transport { Task { await transport.shutdown() } }
            throw error
        }
        let name = warm ? "pipeline-warm" : "pipeline-cold"
        var target = BenchTarget(
            name: name, executor: nil,
            resolve: { host, family in
                _ = try await resolver.resolveRanked(host, family: family)
            },
            close: {
                await resolver.shutdown()
                await transport?.shutdown()
            })
        if warm {
            target.prepare = { hosts, family in
                for host in hosts { _ = try? await resolver.resolveRanked(host, family: family) }
            }
        }
        return target
    }
}
