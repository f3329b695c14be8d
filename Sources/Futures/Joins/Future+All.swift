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
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the values.
    @inlinable
    public static func all<Element>(
        _ futures: some Sequence<Future<Element>>,
        policy: JoinPolicy = .failFast,
        file: StaticString = #fileID,
        line: UInt = #line
    ) -> Future<[Element]> where Value == [Element] {
        let members = Array(futures)
        return allJoin(members, policy: policy).made("all", file, line, members: members)
    }

    @inlinable
    static func allJoin<Element>(_ members: [Future<Element>], policy: JoinPolicy) -> Future<[Element]> where Value == [Element] {
        switch policy {
        case .failFast:
            return join(members, early: { _, outcome in
                outcome.error.map { .failure($0) }
            }, settle: { outcomes in
                .success(outcomes.map { $0.value! })
            })
        case .collectErrors:
            return join(members) { outcomes in
                let failures = failuresOf(outcomes)
                if !failures.isEmpty { return .failure(JoinError(failures: failures)) }
                return .success(outcomes.map { $0.value! })
            }
        case .ignoreErrors:
            return join(members) { outcomes in .success(outcomes.compactMap(\.value)) }
        }
    }

    /// Waits for every future and succeeds with all their outcomes, in input order
    /// (CollapsingFutures' `finallyAll`). It never fails; a member cancelled from outside appears
    /// as `.cancelled`.
    ///
    /// - Parameter futures: the members.
    /// - Parameter file: the file of the call, for diagnostics; leave the default.
    /// - Parameter line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the outcomes.
    @inlinable
    public static func allSettled<Element>(
        _ futures: some Sequence<Future<Element>>,
        file: StaticString = #fileID,
        line: UInt = #line
    ) -> Future<[Outcome<Element>]> where Value == [Outcome<Element>] {
        let members = Array(futures)
        return joinRaw(members) { outcomes in .success(outcomes) }.made("allSettled", file, line, members: members)
    }

    /// Waits for every future and succeeds with their values in input order, `nil` where a member
    /// failed or was cancelled (OAPromise's replace-with-null policy).
    ///
    /// - Parameter futures: the members.
    /// - Parameter file: the file of the call, for diagnostics; leave the default.
    /// - Parameter line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the optional values.
    @inlinable
    public static func allOrNil<Element>(
        _ futures: some Sequence<Future<Element>>,
        file: StaticString = #fileID,
        line: UInt = #line
    ) -> Future<[Element?]> where Value == [Element?] {
        let members = Array(futures)
        return joinRaw(members) { outcomes in .success(outcomes.map(\.value)) }.made("allOrNil", file, line, members: members)
    }

    /// The outcome of the first future to complete. The losers are withdrawn from (cancelled if
    /// nothing else consumes them). Members cancelled from outside are ignored unless every member
    /// is; then the race is cancelled. No members: fails with ``FutureError/emptyInput``.
    ///
    /// - Parameter futures: the members.
    /// - Parameter file: the file of the call, for diagnostics; leave the default.
    /// - Parameter line: the line of the call, for diagnostics; leave the default.
    /// - Returns: the winner's outcome.
    @inlinable
    public static func race(_ futures: some Sequence<Future<Value>>, file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        let members = Array(futures)
        guard !members.isEmpty else { return Future(error: FutureError.emptyInput) }
        return raceJoin(members).made("race", file, line, members: members)
    }

    @inlinable
    static func raceJoin(_ members: [Future<Value>]) -> Future<Value> {
        joinRaw(members, progress: .leading, early: { _, outcome in
            outcome.isCancelled ? nil : outcome
        }, settle: { _ in
            .cancelled  // Only reached when every member was cancelled.
        })
    }

    /// The value of the first future to succeed. The losers are withdrawn from. If every member
    /// fails, fails with a ``JoinError`` of all the failures; members cancelled from outside are
    /// ignored unless every member is, and then the race is cancelled. No members: fails with
    /// ``FutureError/emptyInput``.
    ///
    /// - Parameter futures: the members.
    /// - Parameter file: the file of the call, for diagnostics; leave the default.
    /// - Parameter line: the line of the call, for diagnostics; leave the default.
    /// - Returns: the first success.
    @inlinable
    public static func any(_ futures: some Sequence<Future<Value>>, file: StaticString = #fileID, line: UInt = #line) -> Future<Value> {
        let members = Array(futures)
        guard !members.isEmpty else { return Future(error: FutureError.emptyInput) }
        return anyJoin(members).made("any", file, line, members: members)
    }

    @inlinable
    static func anyJoin(_ members: [Future<Value>]) -> Future<Value> {
        joinRaw(members, progress: .leading, early: { _, outcome in
            outcome.isSuccess ? outcome : nil
        }, settle: { outcomes in
            // Only reached when no member succeeded.
            if outcomes.allSatisfy(\.isCancelled) { return .cancelled }
            return .failure(JoinError(failures: failuresOf(outcomes)))
        })
    }
}

// MARK: - The join machinery

extension Future {
    /// A join whose members' outside cancellation counts as ``FutureError/cancelledMember``.
    @inlinable
    static func join<Element>(
        _ members: [Future<Element>],
        early: (@Sendable (Int, Outcome<Element>) -> Outcome<Value>?)? = nil,
        settle: @escaping @Sendable ([Outcome<Element>]) -> Outcome<Value>
    ) -> Future<Value> {
        joinRaw(members, treatingCancellationAsFailure: true, early: early, settle: settle)
    }

    /// Registers the join on every member (as a consumer). Each member's outcome is offered to
    /// `early` as it arrives (O(1) per member); the first non-`nil` answer completes the join. When
    /// every member has an outcome and none decided early, `settle` gets them all, in input order.
    /// Once decided, the join withdraws from the members still pending; cancelling the join
    /// withdraws from all of them.
    @inlinable
    static func joinRaw<Element>(
        _ members: [Future<Element>],
        treatingCancellationAsFailure: Bool = false,
        progress: JoinMeter.Kind = .mean,
        early: (@Sendable (Int, Outcome<Element>) -> Outcome<Value>?)? = nil,
        settle: @escaping @Sendable ([Outcome<Element>]) -> Outcome<Value>
    ) -> Future<Value> {
        if members.isEmpty { return Future(outcome: settle([])) }
        let promise = Promise<Value>()
        let state = JoinState<Element>(members)
        let sink = MemberSink<Element>(owner: state) { outcome, index in
            let outcome = treatingCancellationAsFailure && outcome.isCancelled
                ? .failure(FutureError.cancelledMember) : outcome
            switch state.record(outcome, at: index, early: early) {
            case .pending:
                return
            case .early(let decision):
                // Withdraw from the members still pending: the join no longer needs them.
                if promise.complete(decision) { state.withdrawFromPending() }
            case .settled(let outcomes):
                promise.complete(settle(outcomes))  // every member has an outcome: none pending
            case .never:
                promise.complete(with: .never)  // only members that can never complete are left
            }
        }
        var neverLike: [Int] = []  // members nothing but cancellation can complete
        var decidedWhileRegistering = false
        for (index, member) in members.enumerated() {
            var startsWork = false
            switch member.storage.registerMember(sink, index: index) {
            case .registered(let neverLikeMember, let demanded):
                if neverLikeMember { neverLike.append(index) }
                // A member completing on another thread may decide the join: see below. A deferred
                // member's work starts only if the join is still undecided (the work of an earlier
                // one, run here, may have decided it), else it is withdrawn from without running.
                guard demanded else { continue }
                startsWork = true
            case .completed(let outcome):
                sink.receive(outcome, index)  // complete already: read here, so such members decide in input order
            }
            let missed = state.registered(upTo: index + 1)
            if let missed {
                // The join was decided (by this member, or by one that completed on another thread)
                // and withdrew from the members registered before its last check: those registered
                // since leave too, and each later one counts as a consumer that withdrew as it
                // arrived, so a loser is cancelled if nothing else needs it, however early the
                // winner completed.
                for (missedIndex, source) in missed { Cancellation.withdraw(from: source, key: state.key(of: missedIndex)) }
                for later in members[(index + 1)...] { Cancellation.withdraw(from: later.storage, .uncounted, key: nil) }
                decidedWhileRegistering = true
                break
            }
            if startsWork { member.storage.startIfDeferred() }
        }
        if !decidedWhileRegistering, let missed = state.registered(upTo: members.count) {
            // Decided by a member that completed on another thread while the others registered:
            // the join withdrew only from those registered before its last check; the rest leave now.
            for (missedIndex, source) in missed { Cancellation.withdraw(from: source, key: state.key(of: missedIndex)) }
        }
        // Never-like members are held weakly, as any consumer holds them; if only they are left,
        // the join can never complete: it becomes never-like too (rather than a broken promise).
        if !neverLike.isEmpty, state.holdWeakly(neverLike) { promise.complete(with: .never) }
        promise.storage.onCancel { state.withdrawFromPending() }  // runs no user code: carries no context
        // Progress, set up only when someone follows the join's progress.
        let count = members.count  // not `members`: the join must not hold never-like ones strongly
        promise.storage.setProgressDemand { target in
            let meter = Guarded(JoinMeter(count: count, kind: progress))
            let key = ObjectIdentifier(target)
            for (index, member) in state.allMembers() {
                member.observeProgress(follower: key) { value, _ in
                    // The join's observers may include the join it is a member of: deep in a nest,
                    // the report queues rather than recursing (a closure is made only then).
                    guard ProgressNesting.enter() else {
                        return ProgressNesting.queue {
                            target.setProgress(meter.withLock { $0.record(value, at: index) }, from: nil)
                        }
                    }
                    target.setProgress(meter.withLock { $0.record(value, at: index) }, from: nil)
                    ProgressNesting.leave()
                }
            }
            // Decided, the join leaves its members' progress: a long-lived loser keeps nothing of it.
            target.register({ _ in
                for (_, member) in state.allMembers() { member.removeProgressFollower(key) }
            }, asConsumer: false, carryingContext: false, observes: false)
        }
        return promise.future
    }

    @inlinable
    static func failuresOf<Element>(_ outcomes: [Outcome<Element>]) -> [(index: Int, error: any Error)] {
        outcomes.enumerated().compactMap { index, outcome in outcome.error.map { (index, $0) } }
    }
}

/// The members' progress of one join: their mean (joins), or the leader's (races).
@usableFromInline
struct JoinMeter {
    @usableFromInline
    enum Kind: Sendable { case mean, leading }

    let kind: Kind
    var values: [Double]
    var sum = 0.0
    var leading = 0.0

    @usableFromInline
    init(count: Int, kind: Kind) {
        self.kind = kind
        values = Array(repeating: 0, count: count)
    }

    /// Records member `index`'s progress; returns the join's.
    @usableFromInline
    mutating func record(_ value: Double, at index: Int) -> Double {
        // A member's part never goes backwards either (its producer may lower its own).
        let part = max(values[index], value)
        sum += part - values[index]
        values[index] = part
        leading = max(leading, value)
        return kind == .mean ? min(max(sum / Double(values.count), 0), 1) : leading
    }
}

/// The members of one join and their outcomes, recorded from many threads.
@usableFromInline
final class JoinState<Element: Sendable>: @unchecked Sendable {
    // Safety: every field is only touched under `LockTable.withLock(self)` (`neverLike` and
    // `neverLikeUndecided` are set once, under it, after registration); `early` runs under it but is
    // library code (the combinators above) that calls no user code. References are released
    // outside the lock.
    @exclusivity(unchecked) @usableFromInline var outcomes: [Outcome<Element>?]
    @exclusivity(unchecked) @usableFromInline var decided = 0
    @exclusivity(unchecked) @usableFromInline var finished = false
    /// The members, to withdraw from: strongly held, except never-like ones (`nil` here, weakly
    /// held in `weakMembers`).
    @exclusivity(unchecked) @usableFromInline var members: [FutureStorage<Element>?]
    @exclusivity(unchecked) @usableFromInline var weakMembers: [Int: WeakSource] = [:]
    /// Which members are never-like (`nil`: none), and how many of those have no outcome.
    @exclusivity(unchecked) @usableFromInline var neverLike: [Bool]?
    @exclusivity(unchecked) @usableFromInline var neverLikeUndecided = 0
    /// How many members have registered, as far as the join knows (the registering call reports
    /// them in index order, in batches), and whether the join has withdrawn from them: a withdrawal
    /// covers only members reported before it, and the registering call withdraws from those it
    /// reports after it (see ``registered(upTo:)``).
    @exclusivity(unchecked) @usableFromInline var registeredCount = 0
    @exclusivity(unchecked) @usableFromInline var withdrawn = false

    @usableFromInline
    enum Step<Result> {
        case pending
        case early(Outcome<Result>)
        case settled([Outcome<Element>])
        /// Undecided, and only never-like members are left: the join can never complete.
        case never
    }

    @inlinable init(_ members: [Future<Element>]) {
        outcomes = Array(repeating: nil, count: members.count)
        // Mapped straight to optionals: converting a whole array to optionals casts each element.
        self.members = members.map { Optional($0.storage) }
    }

    /// After registering: hold the never-like members (`indices`) weakly. Returns whether only they
    /// are left undecided (the join is then finished: it can never complete).
    @inlinable
    func holdWeakly(_ indices: [Int]) -> Bool {
        var released: [FutureStorage<Element>?] = []  // the strong references, dropped after the lock
        defer { releaseOutsideLock(released) }
        return LockTable.withLock(self) {
            var flags = Array(repeating: false, count: outcomes.count)
            for index in indices {
                flags[index] = true
                if let member = members[index] {
                    weakMembers[index] = WeakSource(member)
                    released.append(member)
                    members[index] = nil
                }
                if outcomes[index] == nil { neverLikeUndecided += 1 }
            }
            neverLike = flags
            guard !finished, neverLikeUndecided > 0, decided + neverLikeUndecided == outcomes.count else { return false }
            finished = true
            return true
        }
    }

    /// Records a member's outcome. Returns `.early` the first time `early` decides, `.settled` with
    /// every outcome when the last member arrives undecided, `.never` when only never-like members
    /// are left, else `.pending`.
    @inlinable
    func record<Result>(
        _ outcome: Outcome<Element>,
        at index: Int,
        early: ((Int, Outcome<Element>) -> Outcome<Result>?)?
    ) -> Step<Result> {
        LockTable.withLock(self) {
            guard !finished, outcomes[index] == nil else { return .pending }
            outcomes[index] = outcome
            decided += 1
            if neverLike?[index] == true { neverLikeUndecided -= 1 }  // cancelled: never-like no more
            if let decision = early?(index, outcome) {
                finished = true
                return .early(decision)
            }
            if neverLikeUndecided > 0, decided + neverLikeUndecided == outcomes.count {
                finished = true
                return .never
            }
            guard decided == outcomes.count else { return .pending }
            finished = true
            // Settling happens outside the lock, on this immutable copy.
            return .settled(outcomes.map { $0! })
        }
    }

    /// Records that the members before `end` have registered (or were read complete). Returns `nil`
    /// if the join has not withdrawn; else the members registered since its withdrawal's last check
    /// that have no outcome (the withdrawal covered only those registered before it), for the
    /// caller to withdraw from, outside the lock.
    @inlinable
    func registered(upTo end: Int) -> [(Int, ConsumerSource)]? {
        LockTable.withLock(self) {
            let start = registeredCount
            registeredCount = end
            guard withdrawn else { return nil }
            return (start..<end).compactMap { index -> (Int, ConsumerSource)? in
                guard outcomes[index] == nil else { return nil }
                let member: ConsumerSource? = members[index] ?? weakMembers[index]
                return member.map { (index, $0) }
            }
        }
    }

    /// The key of member `index`'s entry: this join (its sink's owner) and the index.
    @inlinable
    func key(of index: Int) -> RegistrationKey { RegistrationKey(owner: ObjectIdentifier(self), index: index) }

    /// Withdraws the join from the registered members with no outcome yet (taken under the lock,
    /// withdrawn from outside it); the registering call withdraws from those it reports later.
    @inlinable
    func withdrawFromPending() {
        let pending = LockTable.withLock(self) {
            withdrawn = true
            return outcomes.indices.prefix(registeredCount).compactMap { index -> (Int, ConsumerSource)? in
                guard outcomes[index] == nil else { return nil }
                let member: ConsumerSource? = members[index] ?? weakMembers[index]
                return member.map { (index, $0) }
            }
        }
        for (index, member) in pending { Cancellation.withdraw(from: member, key: key(of: index)) }
    }

    /// Every member still alive, with its index (for progress).
    @inlinable
    func allMembers() -> [(Int, FutureStorage<Element>)] {
        LockTable.withLock(self) {
            members.indices.compactMap { index -> (Int, FutureStorage<Element>)? in
                if let member = members[index] { return (index, member) }
                return (weakMembers[index]?.resolved as? FutureStorage<Element>).map { (index, $0) }
            }
        }
    }
}
