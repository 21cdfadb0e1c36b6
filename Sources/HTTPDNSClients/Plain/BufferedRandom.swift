import Crypto

/// Cryptographically random bits fetched 4 KiB at a time (swift-crypto's key generation: BoringSSL's CSPRNG, seeded
/// by the kernel): query IDs and DNS 0x20 cases must be unpredictable to an off-path forger who sees some of them, so
/// no seeded generator, but one call per 512 words rather than one system call per word
/// (`SystemRandomNumberGenerator` asks the kernel on every `next()`). One per event loop, used only there.
struct BufferedRandom: RandomNumberGenerator {
    private var words = [UInt64](repeating: 0, count: 512)
    private var position = 512

    mutating func next() -> UInt64 {
        if position == words.count { refill() }
        defer { position += 1 }
        return words[position]
    }

    private mutating func refill() {
        let key = SymmetricKey(size: SymmetricKeySize(bitCount: words.count * 64))
        key.withUnsafeBytes { random in
            words.withUnsafeMutableBytes { $0.copyMemory(from: random) }
        }
        position = 0
    }
}
