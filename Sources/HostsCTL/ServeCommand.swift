public import ArgumentParser
import Dispatch
import Foundation
import HTTPDNS
import HTTPDNSServer

/// `hostsctl serve`: answers HTTP DNS (RFC 8484 DoH, the JSON API, Alibaba- and Tencent-compatible APIs) from the
/// configured pipeline until SIGINT or SIGTERM, then shuts down gracefully.
public struct ServeCommand: AsyncParsableCommand {
    /// The subcommand's name and help.
    public static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Answer HTTP DNS (DoH, JSON, vendor APIs) from the resolver pipeline.",
        discussion: """
            Endpoints: /dns-query (RFC 8484, GET ?dns= and POST application/dns-message), /resolve?name=&type=
            (application/dns-json), /ACCOUNT/d?host= and /ACCOUNT/sign_d?host=&t=&s= (Alibaba-compatible; accounts from
            serve.accounts), /d?dn= (Tencent-compatible), /healthz and /readyz. With serve.certificate and
            serve.privateKey the server speaks TLS with HTTP/2 and HTTP/1.1; otherwise plain HTTP/1.1.
            SIGINT or SIGTERM: /readyz answers 503, requests in progress finish (5 s at most), the cache is saved.
            """
    )

    /// The settings file.
    @Option(help: "The settings file (default: $HOSTSCTL_CONFIG, else the defaults).")
    public var config: String?

    /// Overrides `serve.listen`.
    @Option(help: "The address and port to listen on, IP:PORT (default: serve.listen, 127.0.0.1:8053).")
    public var listen: String?

    /// Creates the command (used by the argument parser).
    public init() {}

    /// Serves until a signal arrives.
    public func run() async throws {
        let file = SettingsLoading.load(config)
        for diagnostic in file.diagnostics { printToStandardError(diagnostic.description) }
        guard file.errors.isEmpty else {
            throw ValidationError("the settings have errors; see above (hostsctl config check)")
        }
        let settings = try file.get()
        let address = try listen.map { try ServerAddress(parsing: $0) } ?? settings.serve.listen
        let logger = CommandLogging.logger()
        let resolver = try HostResolver(settings: settings, logger: logger)
        var accounts: [String: HTTPDNSSecret?] = [:]
        for account in settings.serve.accounts {
            guard let variable = account.secretVariable else {
                accounts[account.id] = .some(nil)
                continue
            }
            guard let secret = HTTPDNSSecret(environmentVariable: variable) else {
                await resolver.shutdown()
                throw ValidationError("account \(account.id): the environment variable \(variable) is not set")
            }
            accounts[account.id] = secret
        }
        let service = HTTPDNSService(
            resolver: resolver,
            configuration: .init(maximumAnswers: settings.serve.maximumAnswers, accounts: accounts),
            logger: logger)
        let server: HTTPDNSServer
        do {
            server = try await HTTPDNSServer.start(
                service: service,
                configuration: .init(
                    host: address.ip.description, port: Int(address.port),
                    certificatePath: settings.serve.certificate, privateKeyPath: settings.serve.privateKey,
                    maximumBodyBytes: settings.serve.maximumBodyBytes,
                    idleTimeout: .milliseconds(settings.serve.idleTimeoutMilliseconds)),
                logger: logger)
        } catch {
            await resolver.shutdown()
            throw error
        }
        let scheme = settings.serve.certificate == nil ? "http" : "https"
        let host = address.ip.family == .ipv6 ? "[\(address.ip)]" : address.ip.description
        print("hostsctl serve: \(scheme)://\(host):\(server.port)/dns-query (Ctrl-C stops)")
        await Self.waitForSignal()
        await server.shutdown()
        await resolver.shutdown()
    }

    /// Returns when SIGINT or SIGTERM arrives.
    static func waitForSignal() async {
        let (signals, continuation) = AsyncStream.makeStream(of: Void.self)
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield() }
            source.resume()
            sources.append(source)
        }
        for await _ in signals { break }
        for source in sources { source.cancel() }
    }
}
