import Synchronization

/// A change counter per host name, for copies of answers kept outside the cache (serve's `AnswerMemo`): a copy
/// made when its name's counter read `v` is good while the counter still reads `v` (and the copy's own `steadyFor`
/// has not passed), so a store of one name ends only that name's copies, not every copy at once.
///
/// Names share ``slots`` counters by a hash, so a change of one name also ends the copies of the few names that share
/// its counter: never a copy kept too long, only one made again sooner. A counter only grows.
package final class NameVersions: @unchecked Sendable {
    // Unchecked: the counters are allocated once in `init`, freed in `deinit`, and otherwise only read and written
    // through their atomic operations, from any thread.
    /// How many counters the names share.
    package static let slots = 16_384

    private let counters: UnsafeMutablePointer<Atomic<UInt64>>

    package init() {
        counters = .allocate(capacity: Self.slots)
        for slot in 0..<Self.slots { (counters + slot).initialize(to: Atomic(0)) }
    }

    deinit {
        counters.deinitialize(count: Self.slots)
        counters.deallocate()
    }

    /// The counter `name` goes by: FNV-1a of its bytes, ASCII letters folded and a trailing dot left out, so a
    /// question's name as the client cased it and the cache's normalised one meet.
    package static func slot(for name: String) -> Int {
        var hash: UInt32 = 0x811C_9DC5
        var bytes = name.utf8[...]
        if bytes.last == UInt8(ascii: ".") { bytes = bytes.dropLast() }
        for byte in bytes {
            let folded = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            hash = (hash ^ UInt32(folded)) &* 0x0100_0193
        }
        return Int(hash % UInt32(slots))
    }

    /// The counter of `slot` now.
    package func version(_ slot: Int) -> UInt64 {
        (counters + slot).pointee.load(ordering: .acquiring)
    }

    /// Counts a change of `name`, once it is visible.
    package func changed(_ name: String) {
        (counters + Self.slot(for: name)).pointee.add(1, ordering: .releasing)
    }
}
