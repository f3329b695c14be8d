extension Future {
    /// Races cancellable operations (CollapsingFutures' `raceForWinnerLastingUntil:`): each
    /// operation starts at once with its own token; the first to succeed wins and the others'
    /// tokens are cancelled (and the race withdraws from their futures). The winner's token stays
    /// live until `until` is cancelled, so the winner can keep (and later clean up) what its result
    /// holds: a connection, a file, a subscription.
    ///
    /// ```swift
    /// let connection = Future<Connection>.race([
    ///     { token in connect(to: primary, cancelledBy: token) },
    ///     { token in connect(to: mirror, cancelledBy: token) },
    /// ], until: screen.closed)
    /// ```
    ///
    /// - If every operation fails, the race fails with a ``JoinError`` of all the failures (in
    ///   input order); if every one is cancelled, the race is cancelled.
    /// - When `until` is cancelled, every operation's token is cancelled, the winner's too, and a
    ///   race still pending is cancelled. If `until` is already cancelled, no operation starts.
    /// - Cancelling the race before it has a winner cancels every operation's token.
    /// - No operations: fails with ``FutureError/emptyInput``.
    ///
    /// - Parameters:
    ///   - operations: the contenders; each gets its own token and returns its future.
    ///   - until: the token that ends the winner's lifetime (and the race, if still running).
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: the winner's value.
    public static func race(
        _ operations: [@Sendable (CancellationToken) -> Future<Value>],
        until: CancellationToken,
        file: StaticString = #fileID,
        line: UInt = #line
    ) -> Future<Value> {
        racing(operations, until: until, file: file, line: line)
    }

    /// ``race(_:until:file:line:)`` without the call site, kept so that code naming this form
    /// still compiles; a call chooses the form above.
    @_disfavoredOverload
    public static func race(
        _ operations: [@Sendable (CancellationToken) -> Future<Value>],
        until: CancellationToken
    ) -> Future<Value> {
        racing(operations, until: until, file: #fileID, line: #line)
    }

    static func racing(
        _ operations: [@Sendable (CancellationToken) -> Future<Value>],
        until: CancellationToken,
        file: StaticString,
        line: UInt
    ) -> Future<Value> {
        guard !operations.isEmpty else { return Future(error: FutureError.emptyInput) }
        guard !until.isCancelled else { return .cancelled }
        let contest = Contest(count: operations.count)
        let futures = Swift.zip(operations, contest.sources).map { operation, source in operation(source.token) }
        let raced = joinRaw(futures, early: { index, outcome in
            guard outcome.isSuccess else { return nil }
            contest.winner = index  // under the join's lock, before anyone can see the outcome
            return outcome
        }, settle: { outcomes in
            if outcomes.allSatisfy(\.isCancelled) { return .cancelled }
            return .failure(JoinError(failures: failuresOf(outcomes)))
        })
        // `until` keeps the contest (and so the winner's source) alive until it fires; the
        // registration is removed once the race ends with no winner to clean up.
        // (It runs no user code: the operations' own handlers on their tokens carry their contexts.)
        until.onCancel(unless: contest.noWinner.token, carryingContext: false) { contest.cancelAll() }
        // The join and the future the caller gets both show as this race.
        _ = raced.made("race", file, line, members: futures)
        let result = raced.cancelled(by: until).made("race", file, line)
        // Decided by what the caller gets: a winner's value, or nothing (then no token survives,
        // even an operation's that succeeded just as the race was cancelled).
        result.storage.register(
            { outcome in contest.decided(won: outcome.isSuccess) }, asConsumer: false, carryingContext: false, observes: false)
        return result
    }
}

/// The tokens of one `race(_:until:)` and who won.
private final class Contest: Sendable {
    let sources: [CancellationSource]
    /// Cancelled when the race ends without a winner, to drop the registration on `until`.
    let noWinner = CancellationSource()
    private let won = Locked<Int?>(nil)  // set under the join's stripe lock: a lock of its own

    init(count: Int) { sources = (0..<count).map { _ in CancellationSource() } }

    /// Set once, by the join, when an operation wins.
    var winner: Int? {
        get { won.withLock { $0 } }
        set { won.withLock { $0 = newValue } }
    }

    /// The race completed, with the winner's value or not: cancel the losers' tokens (every token,
    /// if the caller got no value).
    func decided(won: Bool) {
        let winner = won ? winner : nil
        for (index, source) in sources.enumerated() where index != winner { source.cancel() }
        if winner == nil { noWinner.cancel() }
    }

    func cancelAll() {
        for source in sources { source.cancel() }
    }
}
