import HTTPDNSCore

/// Why asking the upstreams failed: the error callers see, and what it says about the name. Made by
/// ``choosing(_:)`` from every upstream's failure, so the rule is written once for asking in order and for races.
struct UpstreamFailure: Error {
    /// The error callers see: NXDOMAIN if any upstream said so, else no data, else the first error.
    var error: any Error
    /// Every upstream asked said NXDOMAIN or no data (none timed out or failed otherwise).
    var everyUpstreamDenied: Bool
    /// The chosen NXDOMAIN or no data came from an upstream whose negative answers are trusted.
    var authoritative: Bool

    /// The chosen error when it is NXDOMAIN or no data.
    var negative: HTTPDNSError? {
        guard let error = error as? HTTPDNSError, error.code.isNegativeAnswer else { return nil }
        return error
    }

    /// `error` as a failure: itself when it is one, else a failure that says nothing about the name.
    static func wrapping(_ error: any Error) -> UpstreamFailure {
        error as? UpstreamFailure ?? UpstreamFailure(error: error, everyUpstreamDenied: false, authoritative: false)
    }

    /// The failure of a lookup whose upstreams (or groups of upstreams) all failed with `failures`, in the order
    /// they were asked: NXDOMAIN over no data over the first error; every one denied only when each said so.
    /// `failures` must not be empty.
    static func choosing(_ failures: [UpstreamFailure]) -> UpstreamFailure {
        let codes = failures.map { ($0.error as? HTTPDNSError)?.code }
        var chosen = failures[codes.firstIndex(of: .notFound) ?? codes.firstIndex(of: .noData) ?? 0]
        chosen.everyUpstreamDenied = failures.allSatisfy(\.everyUpstreamDenied)
        return chosen
    }

    /// The failure of one upstream: `error`, and whether a negative answer from it is trusted.
    static func single(_ error: any Error, trustsNegativeAnswers: Bool) -> UpstreamFailure {
        let negative = (error as? HTTPDNSError)?.code.isNegativeAnswer ?? false
        return UpstreamFailure(
            error: error, everyUpstreamDenied: negative, authoritative: negative && trustsNegativeAnswers)
    }
}

/// How a race of upstream groups ends, as a value: the first success wins and is stored in place of what the cache
/// held; an answer the private-address guard rejects ends the race at once when nothing has won yet; otherwise the
/// race fails once every group has, with ``UpstreamFailure/choosing(_:)``. The resolver keeps it under one lock
/// with the stores it decides.
///
/// Later successes meet the trust rule: answers of sources of different trust never mix. A later answer as trusted
/// as the stored one is merged into it; a more trusted one replaces it (what an untrusted source, say a spoofed
/// answer on the local network, gave is dropped from the cache); a less trusted one is discarded.
struct RaceOutcome {
    /// What to do with one group's outcome.
    enum Step {
        /// The first success: store it, replacing, and return it to the caller.
        case win
        /// A success after the winner, as trusted as the stored answer: merge it into the cache.
        case merge
        /// A success after the winner, more trusted than the stored answer: store it in its place.
        case replace
        /// A success after the winner, less trusted than the stored answer: drop it.
        case discard
        /// The race is lost: throw this.
        case fail(any Error)
        /// Nothing yet (a failure while other groups are still running, or after the race was decided).
        case wait
    }

    /// How many groups run.
    let groups: Int
    /// Whether the caller has its answer or error.
    private(set) var isDecided = false
    /// Whether the answer stored last came from a trusted source.
    private var storedIsTrusted = false
    private var failures: [UpstreamFailure] = []

    init(groups: Int) {
        self.groups = groups
    }

    /// A group answered, from a source `trusted` or not.
    mutating func succeeded(trusted: Bool) -> Step {
        guard isDecided else {
            isDecided = true
            storedIsTrusted = trusted
            return .win
        }
        if trusted == storedIsTrusted { return .merge }
        guard trusted else { return .discard }
        storedIsTrusted = true
        return .replace
    }

    /// A group failed with `error`.
    mutating func failed(_ error: any Error) -> Step {
        failures.append(.wrapping(error))
        guard !isDecided else { return .wait }
        if (error as? HTTPDNSError)?.code == .privateAddress {
            isDecided = true
            return .fail(error)
        }
        guard failures.count == groups else { return .wait }
        isDecided = true
        return .fail(UpstreamFailure.choosing(failures))
    }
}

/// The resolver's own admissions, as a value kept under its one lock: which addresses a probe round may take, and
/// whether a background refresh may start now. Time comes in as an argument, so tests move it by hand.
struct PipelineAdmissions: Sendable {
    /// Addresses with a probe in flight, for any host: an address is never probed twice at once.
    private(set) var addressesBeingProbed: Set<IPAddress> = []
    /// The refreshes allowed now (a token bucket with a burst of one second's worth) and when it was last filled.
    private var refreshTokens: (tokens: Double, last: ContinuousClock.Instant?) = (0, nil)

    /// Claims for one probe round the `candidates` not already being probed (and, unless `includingGuarded`, not
    /// private or otherwise non-public), at most `limit` of them in their order; they stay claimed until
    /// ``releaseProbes(_:)``.
    mutating func claimProbes(_ candidates: [IPAddress], limit: Int, includingGuarded: Bool) -> [IPAddress] {
        var chosen: [IPAddress] = []
        for ip in candidates where chosen.count < limit {
            guard includingGuarded || !ip.isNonPublic, addressesBeingProbed.insert(ip).inserted else { continue }
            chosen.append(ip)
        }
        return chosen
    }

    /// Ends the claims of a probe round.
    mutating func releaseProbes(_ addresses: [IPAddress]) {
        for ip in addresses { addressesBeingProbed.remove(ip) }
    }

    /// Whether a background refresh may start at `now`, at most `perSecond` a second with a burst of as many; the
    /// first call finds the bucket full.
    mutating func admitRefresh(at now: ContinuousClock.Instant, perSecond: Double) -> Bool {
        let elapsed = refreshTokens.last.map { (now - $0).fractionalSeconds } ?? 1
        // A reading earlier than the last (threads racing to the lock) neither refills nor moves the bucket back.
        refreshTokens = (
            min(perSecond, refreshTokens.tokens + max(elapsed, 0) * perSecond), max(now, refreshTokens.last ?? now)
        )
        guard refreshTokens.tokens >= 1 else { return false }
        refreshTokens.tokens -= 1
        return true
    }
}
