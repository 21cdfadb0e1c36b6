import Foundation

/// DNS messages crafted by hand for hostile-server tests (the resolver itself only uses c-ares to build and read).
public enum CraftedWire {
    /// A response to `query` with `rcode`, the given A records and message `id`.
    public static func response(
        to query: [UInt8], rcode: UInt8 = 0, a: [[UInt8]] = [], ttl: UInt32 = 60, id: UInt16 = 0
    ) -> [UInt8] {
        var message = query
        message[0] = UInt8(id >> 8)
        message[1] = UInt8(id & 0xff)
        message[2] = 0x81
        message[3] = 0x80 | rcode
        message[6] = 0
        message[7] = UInt8(a.count)
        for ip in a {
            message += [0xC0, 0x0C, 0, 1, 0, 1]
            message += withUnsafeBytes(of: ttl.bigEndian, Array.init)
            message += [0, 4] + ip
        }
        return message
    }

    /// The DNS query inside a DoH request (GET `dns=` or POST body).
    public static func query(of request: LocalHTTPServer.Request) -> [UInt8] {
        if request.method == "POST" { return request.body }
        var text = (request.query["dns"] ?? "").replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return Array(Data(base64Encoded: text) ?? Data())
    }
}
