import NIOCore

/// The deadlines of a ``PlainDNSEngine``'s tries: one queue per round, since every try of a round waits the same
/// time and so joins its queue in deadline order; taking the overdue ones looks only at the queues' fronts. An entry
/// is never removed early: one whose query has moved on or ended is skipped when its turn comes. The queues hold the
/// tries started within one timeout of each round (the query rate times the timeout, not the upstream places: an
/// abandoned query's entry stays until due), and are emptied whenever no query waits.
struct PlainDNSDeadlines {
    private var rounds: [CircularBuffer<(query: PlainDNSEngine.Query, attempt: Int, deadline: NIODeadline)>] = []

    /// Adds the deadline of `query`'s try `attempt`, of round `round`.
    mutating func add(_ query: PlainDNSEngine.Query, attempt: Int, round: Int, at deadline: NIODeadline) {
        while rounds.count <= round { rounds.append(CircularBuffer()) }
        rounds[round].append((query, attempt, deadline))
    }

    /// Takes every entry due by `now`, in each round's order.
    mutating func overdue(at now: NIODeadline) -> [(PlainDNSEngine.Query, Int)] {
        var due: [(PlainDNSEngine.Query, Int)] = []
        for round in rounds.indices {
            while let first = rounds[round].first, first.deadline <= now {
                rounds[round].removeFirst()
                due.append((first.query, first.attempt))
            }
        }
        return due
    }
}
