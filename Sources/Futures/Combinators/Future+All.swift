/// What `Future.all(_:policy:)` does when members fail (OAPromise's join policies).
public enum JoinPolicy: Sendable, Hashable {
    /// The first failure fails the join at once; the members still pending that only the join
    /// consumes are cancelled.
    case failFast
    /// Waits for every member; if any failed, fails with a ``JoinError`` holding every failure.
    case collectErrors
    /// Waits for every member and succeeds with the values of the members that succeeded.
    case ignoreErrors
}

extension Future {
    /// Waits for every future and succeeds with their values in input order.
    ///
    /// ```swift
    /// let pictures = Future.all([loadPicture(1), loadPicture(2)], policy: .failFast)
    /// ```
    ///
    /// The join is a consumer of each member: cancelling it cancels the members nobody else
    /// consumes. A member cancelled from outside counts as a failure with
    /// ``FutureError/cancelledMember``, and the policy applies. No members: succeeds with `[]`.
    ///
    /// - Parameters:
    ///   - futures: the members.
    ///   - policy: what member failures do (``JoinPolicy``).
    /// - Returns: a future of the values.
    public static func all<Element>(
        _ futures: some Sequence<Future<Element>>,
        policy: JoinPolicy = .failFast
    ) -> Future<[Element]> where Value == [Element] {
        join(Array(futures)) { outcomes, decided in
            switch policy {
            case .failFast:
                if let (_, error) = firstFailure(outcomes) { return .failure(error) }
                guard decided == outcomes.count else { return nil }
                return .success(outcomes.map { $0!.value! })
            case .collectErrors:
                guard decided == outcomes.count else { return nil }
                let failures = failuresOf(outcomes)
                if !failures.isEmpty { return .failure(JoinError(failures: failures)) }
                return .success(outcomes.map { $0!.value! })
            case .ignoreErrors:
                guard decided == outcomes.count else { return nil }
                return .success(outcomes.compactMap { $0?.value })
            }
        }
    }

    /// Waits for every future and succeeds with all their outcomes, in input order
    /// (CollapsingFutures' `finallyAll`). It never fails; a member cancelled from outside appears
    /// as `.cancelled`.
    ///
    /// - Parameter futures: the members.
    /// - Returns: a future of the outcomes.
    public static func allSettled<Element>(
        _ futures: some Sequence<Future<Element>>
    ) -> Future<[Outcome<Element>]> where Value == [Outcome<Element>] {
        let members = Array(futures)
        return Future<[Outcome<Element>]>.joinRaw(members) { outcomes, decided in
            guard decided == outcomes.count else { return nil }
            return .success(outcomes.map { $0! })
        }
    }

    /// Waits for every future and succeeds with their values in input order, `nil` where a member
    /// failed or was cancelled (OAPromise's replace-with-null policy).
    ///
    /// - Parameter futures: the members.
    /// - Returns: a future of the optional values.
    public static func allOrNil<Element>(
        _ futures: some Sequence<Future<Element>>
    ) -> Future<[Element?]> where Value == [Element?] {
        let members = Array(futures)
        return Future<[Element?]>.joinRaw(members) { outcomes, decided in
            guard decided == outcomes.count else { return nil }
            return .success(outcomes.map { $0!.value })
        }
    }

    /// The outcome of the first future to complete. The losers are withdrawn from (cancelled if
    /// nothing else consumes them). Members cancelled from outside are ignored unless every member
    /// is; then the race is cancelled. No members: fails with ``FutureError/emptyInput``.
    ///
    /// - Parameter futures: the members.
    /// - Returns: the winner's outcome.
    public static func race(_ futures: some Sequence<Future<Value>>) -> Future<Value> {
        let members = Array(futures)
        guard !members.isEmpty else { return Future(error: FutureError.emptyInput) }
        return joinRaw(members) { outcomes, decided in
            if let winner = outcomes.first(where: { $0 != nil && !$0!.isCancelled }) { return winner! }
            return decided == outcomes.count ? .cancelled : nil
        }
    }

    /// The value of the first future to succeed. The losers are withdrawn from. If every member
    /// fails, fails with a ``JoinError`` of all the failures; members cancelled from outside are
    /// ignored unless every member is, and then the race is cancelled. No members: fails with
    /// ``FutureError/emptyInput``.
    ///
    /// - Parameter futures: the members.
    /// - Returns: the first success.
    public static func any(_ futures: some Sequence<Future<Value>>) -> Future<Value> {
        let members = Array(futures)
        guard !members.isEmpty else { return Future(error: FutureError.emptyInput) }
        return joinRaw(members) { outcomes, decided in
            if let winner = outcomes.first(where: { $0?.isSuccess == true }) { return winner! }
            guard decided == outcomes.count else { return nil }
            if outcomes.allSatisfy({ $0!.isCancelled }) { return .cancelled }
            return .failure(JoinError(failures: outcomes.enumerated().compactMap { index, outcome in
                outcome!.error.map { (index, $0) }
            }))
        }
    }
}

// MARK: - The join machinery

extension Future {
    /// A join whose members' outside cancellation counts as ``FutureError/cancelledMember``.
    static func join<Element>(
        _ members: [Future<Element>],
        decide: @escaping @Sendable ([Outcome<Element>?], Int) -> Outcome<Value>?
    ) -> Future<Value> {
        joinRaw(members) { outcomes, decided in
            decide(outcomes.map { outcome in
                outcome.map { $0.isCancelled ? .failure(FutureError.cancelledMember) : $0 }
            }, decided)
        }
    }

    /// Registers the join on every member (as a consumer) and completes it as soon as `decide`
    /// returns an outcome, given the members' outcomes so far (input order) and how many there are.
    /// Once decided, the join withdraws from the members still pending; cancelling the join
    /// withdraws from all of them.
    static func joinRaw<Element>(
        _ members: [Future<Element>],
        decide: @escaping @Sendable ([Outcome<Element>?], Int) -> Outcome<Value>?
    ) -> Future<Value> {
        if members.isEmpty, let outcome = decide([], 0) { return Future(outcome: outcome) }
        let promise = Promise<Value>()
        let state = JoinState<Element>(count: members.count)
        let sources = members.map(\.storage)
        for (index, member) in members.enumerated() {
            member.storage.register({ outcome in
                guard let decision = state.record(outcome, at: index, decide: decide) else { return }
                if promise.complete(decision) {
                    // Withdraw from the members still pending: the join no longer needs them.
                    for (other, source) in sources.enumerated() where !state.hasOutcome(at: other) {
                        Cancellation.withdraw(from: source)
                    }
                }
            }, asConsumer: true)
        }
        promise.onCancel {
            for (other, source) in sources.enumerated() where !state.hasOutcome(at: other) {
                Cancellation.withdraw(from: source)
            }
        }
        return promise.future
    }

    static func firstFailure<Element>(_ outcomes: [Outcome<Element>?]) -> (Int, any Error)? {
        for (index, outcome) in outcomes.enumerated() {
            if let error = outcome?.error { return (index, error) }
        }
        return nil
    }

    static func failuresOf<Element>(_ outcomes: [Outcome<Element>?]) -> [(index: Int, error: any Error)] {
        outcomes.enumerated().compactMap { index, outcome in outcome?.error.map { (index, $0) } }
    }
}

/// The members' outcomes of one join, recorded from many threads.
final class JoinState<Element: Sendable>: @unchecked Sendable {
    // Safety: `outcomes`, `decided` and `finished` are only touched under `LockTable.withLock(self)`;
    // `decide` runs under it but is library code that calls no user code.
    private var outcomes: [Outcome<Element>?]
    private var decided = 0
    private var finished = false

    init(count: Int) { outcomes = Array(repeating: nil, count: count) }

    /// Records a member's outcome; returns the join's outcome the first time `decide` gives one.
    func record<Result>(
        _ outcome: Outcome<Element>,
        at index: Int,
        decide: ([Outcome<Element>?], Int) -> Outcome<Result>?
    ) -> Outcome<Result>? {
        LockTable.withLock(self) {
            guard !finished, outcomes[index] == nil else { return nil }
            outcomes[index] = outcome
            decided += 1
            guard let decision = decide(outcomes, decided) else { return nil }
            finished = true
            return decision
        }
    }

    func hasOutcome(at index: Int) -> Bool {
        LockTable.withLock(self) { outcomes[index] != nil }
    }
}
