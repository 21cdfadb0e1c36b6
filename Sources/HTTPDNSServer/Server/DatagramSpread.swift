import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Spreads a UDP listener's datagrams at random over its sockets (one per event loop, all on one port with
/// `SO_REUSEPORT`), one datagram at a time.
///
/// Left to itself, the kernel picks a group's socket by a hash of the client's address and port, so every datagram
/// of one client socket goes to the same event loop. A few busy clients (a forwarding resolver, a load generator with
/// four sockets) then split unevenly, often three to one or all on one loop, and that loop is saturated while the
/// others idle. DNS over UDP keeps no state between datagrams, so any socket may take any query: a classic BPF program
/// attached to the group (`SO_ATTACH_REUSEPORT_CBPF`) returns a random socket index for each datagram. Where the
/// kernel refuses the program, the hash stays.
enum DatagramSpread {
    /// One classic BPF instruction (`struct sock_filter` of `<linux/filter.h>`: code, two jump offsets, a constant).
    /// Swift lays these fields out as C does (in order, each at its natural alignment: 8 bytes); a kernel that read
    /// them otherwise would refuse the program, and the test of the spread would fail.
    private struct Instruction {
        var code: UInt16
        var jumpIfTrue: UInt8 = 0
        var jumpIfFalse: UInt8 = 0
        var constant: UInt32
    }

    /// `struct sock_fprog`: the program's length and its instructions. `@unchecked Sendable`: NIO sets a socket option
    /// from the event loop's thread, and the instructions it points at are written before and freed only after that
    /// call has returned (``attach(to:sockets:)`` awaits it); nothing else reads them.
    private struct Program: @unchecked Sendable {
        var length: UInt16
        var instructions: UnsafePointer<Instruction>
    }

    /// `A = random()`, `A %= sockets`, `return A`: the index of the group's socket that takes the datagram.
    private static func instructions(sockets: Int) -> [Instruction] {
        // BPF_LD | BPF_W | BPF_ABS from the ancillary area (SKF_AD_OFF, -4096) at SKF_AD_RANDOM (56): a random word.
        let loadRandom = Instruction(code: 0x20, constant: UInt32(bitPattern: -4096 + 56))
        // BPF_ALU | BPF_MOD | BPF_K.
        let modulo = Instruction(code: 0x94, constant: UInt32(sockets))
        // BPF_RET | BPF_A.
        let returnA = Instruction(code: 0x16, constant: 0)
        return [loadRandom, modulo, returnA]
    }

    /// Attaches the program to the reuse-port group of `channel`'s socket, which holds `sockets` sockets (in the
    /// order they were bound, which is the index the program returns).
    /// - Throws: the `setsockopt` error when the kernel refuses the program.
    static func attach(to channel: any Channel, sockets: Int) async throws {
        guard sockets > 1, let options = channel as? any SocketOptionProvider else { return }
        let program = instructions(sockets: sockets)
        let memory = UnsafeMutablePointer<Instruction>.allocate(capacity: program.count)
        memory.initialize(from: program, count: program.count)
        defer { memory.deallocate() }
        try await options.unsafeSetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_ATTACH_REUSEPORT_CBPF),
            value: Program(length: UInt16(program.count), instructions: UnsafePointer(memory))
        ).get()
    }
}
