import HTTPDNS

/// Launching a server on ports picked just before it binds them: another process can take a port in between, so a
/// launch that does not come up is tried again on fresh ports a few times.
public enum ServerLaunch {
    /// The failure of one try that is worth another try on fresh ports.
    public struct NotUp: Error, CustomStringConvertible {
        /// What was seen (the port, the server's log).
        public var description: String
        /// Creates the failure.
        public init(_ description: String) { self.description = description }
    }

    /// Runs `launch` until it returns, at most `attempts` times; a try that throws ``NotUp`` is retried, any other
    /// error (a missing binary, an unwritable directory) ends the launch at once.
    /// - Throws: ``TestServerError`` with the last try's ``NotUp`` description, or what `launch` threw.
    public static func retrying<Server>(
        _ name: String, attempts: Int = 5, _ launch: (_ attempt: Int) throws -> Server
    ) throws -> Server {
        var last = "\(name) did not start"
        for attempt in 0..<attempts {
            do {
                return try launch(attempt)
            } catch let error as NotUp {
                last = error.description
            }
        }
        throw TestServerError("\(name) did not come up in \(attempts) tries: \(last)")
    }

    /// Starts a DNS server on 127.0.0.1 at a free UDP port, retried on fresh ports: `start` writes its config for the
    /// port and starts the process; the launch waits until the server answers a query.
    /// - Throws: ``TestServerError`` when it never comes up, or what `start` threw.
    static func dnsServer(_ name: String, _ start: (_ port: UInt16) throws -> ChildProcess) throws
        -> (ChildProcess, ServerAddress)
    {
        try retrying(name) { _ in
            let port = try FreePort.udp()
            let process = try start(port)
            let address = ServerAddress(ip: IPAddress(ipv4: 127, 0, 0, 1), port: port)
            guard DNSProbe.waitUntilAnswering(address, while: { process.isRunning }) else {
                process.stop()
                throw NotUp("\(name) did not answer on port \(port)")
            }
            return (process, address)
        }
    }
}
