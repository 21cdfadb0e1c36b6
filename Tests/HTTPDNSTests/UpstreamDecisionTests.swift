import Testing

@testable import HTTPDNS
@testable import HTTPDNSCore

/// The pipeline's decisions as values: which error a failed lookup reports, how a race of upstream groups ends,
/// which addresses a probe round claims and when a background refresh may start, checked without any upstream or
/// lock, with time moved by hand.
@Suite("Upstream decisions")
struct UpstreamDecisionTests {
    static func failure(_ code: HTTPDNSError.Code, trusted: Bool = true) -> UpstreamFailure {
        .single(HTTPDNSError(code: code, message: "\(code)", host: "a.test"), trustsNegativeAnswers: trusted)
    }

    static func code(_ failure: UpstreamFailure) -> HTTPDNSError.Code? { (failure.error as? HTTPDNSError)?.code }

    @Test("a failed lookup reports NXDOMAIN over no data over the first error, wherever it came in the order")
    func errorChoice() {
        let cases: [([HTTPDNSError.Code], HTTPDNSError.Code)] = [
            ([.timeout, .noData, .notFound], .notFound),
            ([.timeout, .noData, .serverFailure], .noData),
            ([.serverFailure, .timeout], .serverFailure),
            ([.noData, .notFound], .notFound),
        ]
        for (codes, expected) in cases {
            #expect(Self.code(.choosing(codes.map { Self.failure($0) })) == expected, "\(codes)")
        }
    }

    @Test("every upstream denied only when each said NXDOMAIN or no data; trust comes from the chosen one")
    func denialAndTrust() {
        let denied = UpstreamFailure.choosing([Self.failure(.noData), Self.failure(.notFound)])
        #expect(denied.everyUpstreamDenied && denied.authoritative && denied.negative?.code == .notFound)
        let mixed = UpstreamFailure.choosing([Self.failure(.notFound), Self.failure(.timeout)])
        #expect(!mixed.everyUpstreamDenied && mixed.authoritative)
        let untrusted = UpstreamFailure.choosing([Self.failure(.timeout), Self.failure(.notFound, trusted: false)])
        #expect(Self.code(untrusted) == .notFound && !untrusted.authoritative)
        #expect(
            UpstreamFailure.single(HTTPDNSError(code: .timeout, message: ""), trustsNegativeAnswers: true).negative
                == nil)
    }

    @Test("a race: the first success wins, later ones merge, failures after the winner change nothing")
    func raceWinner() {
        var race = RaceOutcome(groups: 2)
        guard case .wait = race.failed(HTTPDNSError(code: .timeout, message: "")) else {
            Issue.record("one failure of two decided the race")
            return
        }
        guard case .win = race.succeeded(trusted: false) else {
            Issue.record("the first success did not win")
            return
        }
        #expect(race.isDecided)
        guard case .merge = race.succeeded(trusted: false) else {
            Issue.record("a later success was not merged")
            return
        }
        guard case .wait = race.failed(HTTPDNSError(code: .notFound, message: "")) else {
            Issue.record("a failure after the winner decided again")
            return
        }
    }

    @Test("a race fails only when every group has, with the rule of a single lookup; a guard rejection ends it")
    func raceFailure() {
        var race = RaceOutcome(groups: 2)
        _ = race.failed(UpstreamFailure.choosing([Self.failure(.timeout)]))
        guard case .fail(let error) = race.failed(UpstreamFailure.choosing([Self.failure(.notFound)])),
            let failure = error as? UpstreamFailure
        else {
            Issue.record("two failures of two did not end the race")
            return
        }
        #expect(Self.code(failure) == .notFound && !failure.everyUpstreamDenied)

        var guarded = RaceOutcome(groups: 3)
        guard case .fail(let rejection) = guarded.failed(HTTPDNSError(code: .privateAddress, message: "")) else {
            Issue.record("a guard rejection did not end the race")
            return
        }
        #expect((rejection as? HTTPDNSError)?.code == .privateAddress)
        guard case .merge = guarded.succeeded(trusted: false) else {
            Issue.record("an answer after the rejection was not merged")
            return
        }
    }

    @Test(
        "a race: answers of different trust never mix; a more trusted one replaces, a less trusted one is dropped",
        arguments: [
            // (the winner's trust, the later answer's trust, what happens)
            (false, false, "merge"), (true, true, "merge"), (false, true, "replace"), (true, false, "discard"),
        ])
    func raceTrust(winner: Bool, later: Bool, expected: String) {
        var race = RaceOutcome(groups: 2)
        guard case .win = race.succeeded(trusted: winner) else {
            Issue.record("the first success did not win")
            return
        }
        let step =
            switch race.succeeded(trusted: later) {
            case .merge: "merge"
            case .replace: "replace"
            case .discard: "discard"
            case .win: "win"
            case .fail: "fail"
            case .wait: "wait"
            }
        #expect(step == expected)
    }

    @Test("a race: once a trusted answer replaced an untrusted one, a third untrusted answer is dropped")
    func raceTrustAfterReplacement() {
        var race = RaceOutcome(groups: 3)
        _ = race.succeeded(trusted: false)
        guard case .replace = race.succeeded(trusted: true), case .discard = race.succeeded(trusted: false) else {
            Issue.record("the stored answer's trust did not follow the replacement")
            return
        }
    }

    @Test("probe claims: an address is claimed by one round at a time, at most the limit, guarded ones only if asked")
    func probeClaims() throws {
        let public1 = try #require(IPAddress("203.0.113.1"))
        let public2 = try #require(IPAddress("203.0.113.2"))
        let public3 = try #require(IPAddress("203.0.113.3"))
        let privateAddress = try #require(IPAddress("10.0.0.1"))
        var admissions = PipelineAdmissions()
        let first = admissions.claimProbes(
            [public1, privateAddress, public2, public1, public3], limit: 2, includingGuarded: false)
        #expect(first == [public1, public2])
        // Another round (another host sharing addresses) gets only what is free.
        let second = admissions.claimProbes([public1, public2, public3], limit: 4, includingGuarded: false)
        #expect(second == [public3])
        let guarded = admissions.claimProbes([privateAddress], limit: 4, includingGuarded: true)
        #expect(guarded == [privateAddress])
        admissions.releaseProbes(first)
        let third = admissions.claimProbes([public2, public3], limit: 4, includingGuarded: false)
        #expect(third == [public2])
        #expect(admissions.addressesBeingProbed == [public2, public3, privateAddress])
    }

    @Test("refresh budget: a full burst at first, then the rate, moved by a hand-held clock")
    func refreshBudget() {
        var admissions = PipelineAdmissions()
        var now = ContinuousClock.now
        let admittedAtOnce = (0..<10).filter { _ in admissions.admitRefresh(at: now, perSecond: 4) }.count
        #expect(admittedAtOnce == 4)
        now += .milliseconds(250)
        let afterQuarter = [
            admissions.admitRefresh(at: now, perSecond: 4), admissions.admitRefresh(at: now, perSecond: 4),
        ]
        #expect(afterQuarter == [true, false])
        now += .milliseconds(100)
        let tooSoon = admissions.admitRefresh(at: now, perSecond: 4)
        #expect(!tooSoon)
        // A long quiet spell refills no more than one second's worth.
        now += .seconds(60)
        let afterQuiet = (0..<10).filter { _ in admissions.admitRefresh(at: now, perSecond: 4) }.count
        #expect(afterQuiet == 4)
        // A clock read earlier than the last one (two threads racing to the lock) adds nothing.
        let backwards = admissions.admitRefresh(at: now - .seconds(1), perSecond: 4)
        #expect(!backwards)
        now += .milliseconds(250)
        let afterBackwards = [
            admissions.admitRefresh(at: now, perSecond: 4), admissions.admitRefresh(at: now, perSecond: 4),
        ]
        #expect(afterBackwards == [true, false])
    }
}
