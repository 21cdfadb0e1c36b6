import Foundation
import TestSupport
import Testing

/// `hostsctl serve` inside a network namespace the test makes, against UDP queries whose source address is forged
/// with a raw socket: the victim's address is one of the namespace's own, so the victim can also speak TCP and HTTP
/// from it, and the forged datagrams reach the server exactly as spoofed ones from the internet would.
@Suite(
    "hostsctl serve against forged UDP sources",
    .enabled(if: NetworkNamespace.available || ProcessInfo.processInfo.environment["CI"] != nil))
struct ForgedSourceTests {
    /// Run inside the namespace: waits for the server, forges `forged` UDP queries from the victim with a raw socket
    /// (IP_HDRINCL), then asks as the victim over TCP DNS (20 queries) and HTTP (5 requests) and prints what was
    /// answered as JSON.
    static let script = #"""
        import json, socket, struct, sys, time
        server, dns_port, http_port, victim, forged = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
        def query(ident):
            head = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0)
            return head + b"\x06served\x04test\x00" + struct.pack(">HH", 1, 1)
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection((server, http_port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        for ident in range(forged):
            payload = query(ident)
            udp = struct.pack(">HHHH", 40000 + ident % 1000, dns_port, 8 + len(payload), 0) + payload
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), ident, 0, 64, 17, 0,
                             socket.inet_aton(victim), socket.inet_aton(server))
            raw.sendto(ip + udp, (server, 0))
        time.sleep(0.5)
        tcp_answers = 0
        with socket.create_connection((server, dns_port), timeout=10, source_address=(victim, 0)) as tcp:
            for ident in range(20):
                message = query(ident)
                tcp.sendall(struct.pack(">H", len(message)) + message)
                length = struct.unpack(">H", tcp.recv(2, socket.MSG_WAITALL))[0]
                answer = tcp.recv(length, socket.MSG_WAITALL)
                tcp_answers += answer[3] & 0x0F == 0 and answer[7] == 1
        http_answers = 0
        for _ in range(5):
            with socket.create_connection((server, http_port), timeout=10, source_address=(victim, 0)) as http:
                http.sendall(b"GET /resolve?name=served.test HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                reply = b""
                while chunk := http.recv(4096):
                    reply += chunk
                http_answers += reply.startswith(b"HTTP/1.1 200") and b"127.0.0.88" in reply
        # The victim's own UDP bucket is the one the forger emptied: RRL drops or slips its queries.
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((victim, 0))
        udp.settimeout(1)
        udp.sendto(query(7), (server, dns_port))
        try:
            reply = udp.recv(512)
            udp_state = "truncated" if reply[2] & 0x02 else "answered"
        except socket.timeout:
            udp_state = "dropped"
        print(json.dumps({"tcp": tcp_answers, "http": http_answers, "udp": udp_state}))
        """#

    @Test(
        "2,000 UDP queries forged from a victim's address empty only the victim's UDP bucket: its TCP DNS and HTTP requests are all answered"
    )
    func forgedUDPLeavesOtherTransports() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.inside(["addr", "add", "10.99.0.1/24", "dev", "a0"])
            try await namespace.inside(["addr", "add", "198.51.100.7/32", "dev", "b0"])
            let overrides = try TemporaryFiles.file("127.0.0.88 served.test\n", name: "hosts")
            let settings = try TemporaryFiles.file(
                """
                {"sources": {"order": ["overrides"], "systemFallback": false},
                 "overrides": {"file": "\(overrides)"}, "probe": {"enabled": false},
                 "serve": {"listen": "10.99.0.1:8053", "dns": {"listen": "10.99.0.1:5353"}, "admin": {"listen": "none"},
                           "rateLimitPerSecond": 1, "rateLimitBurst": 30}}
                """, name: "hostsctl.json")
            let log = TemporaryFiles.path("serve-forged.log")
            let serve = try ChildProcess(
                path: "/usr/sbin/ip",
                arguments: [
                    "netns", "exec", namespace.name, HostsCTLProcess.executable, "serve", "--config", settings,
                ],
                logPath: log)
            defer { serve.stop() }
            let file = try TemporaryFiles.file(Self.script, name: "forge.py")
            let output = try await HostsCTLProcess.run(
                executable: "/usr/sbin/ip",
                ["netns", "exec", namespace.name, "python3", file, "10.99.0.1", "5353", "8053", "198.51.100.7", "2000"])
            let serveLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let result =
                try? JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any]
            #expect(result != nil, "\(output.standardOutput) \(output.standardError) \(serveLog)")
            // The burst of 30 and a rate of 1 a second: a shared bucket would have refused nearly all of these.
            #expect(result?["tcp"] as? Int == 20, "\(output.standardOutput)")
            #expect(result?["http"] as? Int == 5, "\(output.standardOutput)")
            #expect(result?["udp"] as? String != "answered", "the forged queries emptied the victim's UDP bucket")
        }
    }
}
