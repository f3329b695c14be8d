/// An outcome as the model writes it.
public enum ModelOutcome: Sendable, Equatable, CustomStringConvertible {
    case success(Int)
    case failure(ModelFailure)
    case cancelled

    public var description: String {
        switch self {
        case .success(let value): ".success(\(value))"
        case .failure(let failure): ".failure(\(failure))"
        case .cancelled: ".cancelled"
        }
    }
}

public enum ModelFailure: Sendable, Equatable {
    case error(Int)
    case brokenPromise
    case timedOut
    case cancelledMember
    /// A `JoinError`: the members that failed (their indices) and their failures, in input order.
    case joined(indices: [Int], failures: [ModelFailure])
    /// An error no rule makes (a failed check's message shows it).
    case unexpected(String)
}

/// The functions the programs' closures compute, shared by the model and the runner.
public enum Closures {
    /// `map`: throws for values that are 3 modulo 7.
    public static func map(_ value: Int) throws -> Int {
        if value % 7 == 3 { throw ModelError(value) }
        return value + 1
    }

    /// `recover`: a code per error.
    public static func recover(_ failure: ModelFailure) -> Int {
        switch failure {
        case .error(let code): 1000 + code
        case .brokenPromise: 2001
        case .timedOut: 2002
        case .cancelledMember: 2003
        case .joined(let indices, _): 2100 + indices.count
        case .unexpected: 2999
        }
    }

    /// `allSettled`: folds the outcomes, in order, into one number.
    public static func settled(_ outcomes: [ModelOutcome]) -> Int {
        outcomes.reduce(0) { folded, outcome in
            let part: Int
            switch outcome {
            case .success(let value): part = value
            case .failure(.error(let code)): part = -10 - code
            case .failure: part = -3
            case .cancelled: part = -2
            }
            return (folded &* 31 &+ part) % 1_000_003
        }
    }

    /// `allOrNil`: folds the values, in order, into one number.
    public static func orNil(_ values: [Int?]) -> Int {
        values.reduce(0) { ($0 &* 31 &+ ($1 ?? -1)) % 1_000_003 }
    }

    /// What a join that waits for every member makes of their outcomes (in input order).
    static func settle(_ join: JoinKind, _ outcomes: [ModelOutcome]) -> ModelOutcome {
        let values = outcomes.compactMap { outcome -> Int? in
            if case .success(let value) = outcome { return value }
            return nil
        }
        switch join {
        case .allCollectingErrors:
            // A member cancelled from outside counts as a failure.
            let failures = outcomes.enumerated().compactMap { index, outcome -> (Int, ModelFailure)? in
                switch outcome {
                case .success: nil
                case .failure(let failure): (index, failure)
                case .cancelled: (index, .cancelledMember)
                }
            }
            if failures.isEmpty { return .success(values.reduce(0, +)) }
            return .failure(.joined(indices: failures.map(\.0), failures: failures.map(\.1)))
        case .allIgnoringErrors:
            return .success(values.reduce(0, +))
        case .allSettled:
            return .success(settled(outcomes))
        case .allOrNil:
            return .success(orNil(outcomes.map { outcome in
                if case .success(let value) = outcome { return value }
                return nil
            }))
        case .all, .race, .any, .zip:
            preconditionFailure("\(join) decides before every member completes")
        }
    }

    /// `mapOutcome`: sees cancellation too.
    public static func mapOutcome(_ outcome: ModelOutcome) -> Int {
        switch outcome {
        case .success(let value): value + 2
        case .failure: -1
        case .cancelled: -2
        }
    }
}

/// The rules, run one step at a time on one thread: what every future's outcome must be, how often
/// each closure runs, and what each completing call returns.
public struct ReferenceModel: Sendable {
    public struct Node: Sendable {
        var kind: NodeKind
        public internal(set) var outcome: ModelOutcome?
        /// The pending futures this one is a consumer of (its source, then what it adopted).
        var consumes: [Int] = []
        /// Its consumers so far, and which of them have withdrawn.
        var consumers: [Int] = []
        var withdrawn: Set<Int> = []
        /// The futures waiting for this one's outcome (derived, adopting, joined, observing).
        var dependents: [Int] = []
        /// For a promise: released, or completed (or made to adopt) by a call.
        var promiseReleased = false
        var promiseResolved = false
        var progress = 0.0
        /// For a deferred future: whether its body ran.
        var started = false
        /// How many times its closure ran.
        public internal(set) var closureRuns = 0
        /// For a join: the outcomes it has heard of, by member (a member may have completed before
        /// the join heard of it).
        var heard: [Int: ModelOutcome] = [:]
        /// The tokens its completion cancels (its completion tokens).
        var completionTokens: [Int] = []
        /// For a timeout: whether its timer is armed.
        var timerArmed = false
        var deadline = 0
        var armedOrder = 0
        var observed = false
        /// Whether another future adopted this one (which may merge it into the adopter).
        public internal(set) var adopted = false
    }

    /// A token: a source's, or one made from tokens or from a future's completion.
    public struct Token: Sendable {
        /// `nil` for a plain source.
        var kind: TokenKind?
        public internal(set) var cancelled = false
        /// What its cancellation cancels, in registration order.
        var listeners: [Listener] = []
    }

    enum Listener: Sendable {
        /// A token made from this one.
        case token(Int)
        /// A future this token cancels (`cancellable(by:)`, `Promise(cancelledBy:)`).
        case node(Int)
    }

    public private(set) var nodes: [Int: Node] = [:]
    public private(set) var tokens: [Int: Token] = [:]
    var now = 0
    var timersArmed = 0

    public init() {}

    /// Armed timers: the sleepers the clock must have before it advances.
    public var armedTimers: Int { nodes.values.filter { $0.timerArmed }.count }

    public func outcome(_ id: Int) -> ModelOutcome? { nodes[id]?.outcome }

    /// How often the producer of node `id` hears of its cancellation (`promise.onCancel`): once if
    /// it is a promise's future and ends cancelled, however that came about.
    public func cancelHeard(_ id: Int) -> Int {
        guard let node = nodes[id], node.kind.isPromise, node.outcome == .cancelled else { return 0 }
        return 1
    }

    // MARK: Steps

    /// Applies one step; returns what the step's call returns, if it returns a `Bool`.
    @discardableResult
    public mutating func apply(_ step: Step) -> Bool? {
        switch step {
        case .make(let id, let kind, _, let observed):
            make(id, kind, observed: observed)
            return nil
        case .makeSource(let id):
            tokens[id] = Token()
            return nil
        case .makeToken(let id, let kind):
            makeToken(id, kind)
            return nil
        case .succeed(let id, let value):
            return resolve(id) { $0.complete(id, .success(value)) }
        case .fail(let id, let code):
            return resolve(id) { $0.complete(id, .failure(.error(code))) }
        case .completeWith(let id, let other):
            // A cancelled future refuses the adoption as a consumer that withdrew as it arrived.
            if let node = nodes[id], !node.promiseReleased, !node.promiseResolved, node.outcome == .cancelled {
                withdrawAsItArrives(from: other)
            }
            return resolve(id) { $0.adopt(id, other) }
        case .dropPromise(let id):
            guard var node = nodes[id], !node.promiseReleased else { return nil }
            node.promiseReleased = true
            nodes[id] = node
            if !node.promiseResolved, node.outcome == nil { complete(id, .failure(.brokenPromise)) }
            return nil
        case .setProgress(let id, let value):
            guard var node = nodes[id], !node.promiseReleased, node.outcome == nil, !value.isNaN else { return nil }
            if !node.promiseResolved { node.progress = min(max(value, 0), 1) }
            nodes[id] = node
            return nil
        case .cancel(let id):
            guard nodes[id]?.outcome == nil else { return false }
            complete(id, .cancelled)
            return true
        case .cancelPromise(let id):
            guard let node = nodes[id], !node.promiseReleased else { return nil }
            guard node.outcome == nil else { return false }
            complete(id, .cancelled)
            return true
        case .cancelSource(let token):
            guard tokens[token]?.cancelled == false else { return false }
            cancel(token: token)
            return true
        case .advance(let seconds):
            let target = now + seconds
            while fireNextTimer(upTo: target) != nil {}
            now = target
            return nil
        }
    }

    /// The time, in seconds.
    public var time: Int { now }

    /// Fires the armed timer that is due first by `target` (the one armed first, of two due at
    /// once), moving the time to its deadline; returns its node, or `nil` if none is due. Timers
    /// due at the same instant fire in tasks, in no order the rules fix, so the runner fires them
    /// one at a time, in this order.
    public mutating func fireNextTimer(upTo target: Int) -> Int? {
        let due = nodes.filter { $0.value.timerArmed && $0.value.deadline <= target }
        guard let (id, node) = due.min(by: { ($0.value.deadline, $0.value.armedOrder) < ($1.value.deadline, $1.value.armedOrder) }) else {
            return nil
        }
        now = max(now, node.deadline)
        nodes[id]!.timerArmed = false
        complete(id, .failure(.timedOut))
        return id
    }

    /// Moves the time to `target` (no timer may be due before it).
    public mutating func setTime(_ target: Int) { now = max(now, target) }

    /// A completing call on a promise: it wins only if the promise is still open.
    private mutating func resolve(_ id: Int, _ body: (inout ReferenceModel) -> Void) -> Bool? {
        guard let node = nodes[id], !node.promiseReleased else { return nil }
        guard !node.promiseResolved, node.outcome == nil else { return false }
        nodes[id]!.promiseResolved = true
        body(&self)
        return true
    }

    private mutating func makeToken(_ id: Int, _ kind: TokenKind) {
        tokens[id] = Token(kind: kind)
        switch kind {
        case .linked(let parent):
            if tokens[parent]!.cancelled { return cancel(token: id) }
            tokens[parent]!.listeners.append(.token(id))
        case .either(let a, let b):
            if tokens[a]!.cancelled || tokens[b]!.cancelled { return cancel(token: id) }
            tokens[a]!.listeners.append(.token(id))
            tokens[b]!.listeners.append(.token(id))
        case .both(let a, let b):
            if tokens[a]!.cancelled, tokens[b]!.cancelled { return cancel(token: id) }
            for input in [a, b] where !tokens[input]!.cancelled { tokens[input]!.listeners.append(.token(id)) }
        case .completion(let node):
            // Reading the token registers on the future (an observer, not a consumer), which
            // starts a deferred one.
            demand(node)
            if nodes[node]!.outcome != nil { return cancel(token: id) }
            nodes[node]!.completionTokens.append(id)
        }
    }

    /// Cancels a token, then what it cancels: the tokens made from it, and the futures it guards.
    private mutating func cancel(token id: Int) {
        guard !tokens[id]!.cancelled else { return }
        tokens[id]!.cancelled = true
        for listener in tokens[id]!.listeners {
            switch listener {
            case .token(let child):
                if case .both(let a, let b) = tokens[child]!.kind, !(tokens[a]!.cancelled && tokens[b]!.cancelled) {
                    continue
                }
                cancel(token: child)
            case .node(let node):
                if nodes[node]!.outcome == nil { complete(node, .cancelled) }
            }
        }
    }

    private mutating func make(_ id: Int, _ kind: NodeKind, observed: Bool) {
        nodes[id] = Node(kind: kind, observed: observed)
        switch kind {
        case .promise: break
        case .guardedPromise(let token):
            if tokens[token]!.cancelled {
                complete(id, .cancelled)
            } else {
                tokens[token]!.listeners.append(.node(id))
            }
        case .value(let value): nodes[id]!.outcome = .success(value)
        case .failed(let code): nodes[id]!.outcome = .failure(.error(code))
        case .map(let source), .flatMap(let source, _), .recover(let source), .mapOutcome(let source),
             .timeout(let source, _):
            listen(id, to: source, asConsumer: true)
        case .observe(let source):
            listen(id, to: source, asConsumer: false)
        case .cancellable(let source, let token):
            if tokens[token]!.cancelled {
                // An already-cancelled token wins, even over a completed source; over a pending
                // one, the new future is a consumer that withdraws at once (before a deferred
                // source it was the only consumer of could start).
                if nodes[source]!.outcome == nil {
                    nodes[source]!.consumers.append(id)
                    nodes[id]!.consumes.append(source)
                }
                complete(id, .cancelled)
                demand(source)
                return
            }
            listen(id, to: source, asConsumer: true)
            tokens[token]!.listeners.append(.node(id))
        case .join(.zip, let members):
            // `zip` first maps every member (a consumer each, which starts a deferred one), then
            // joins the maps in order; once decided, it withdraws from the members still pending.
            for member in members {
                demand(member)
                guard nodes[member]!.outcome == nil else { continue }
                nodes[member]!.dependents.append(id)
                nodes[member]!.consumers.append(id)
                nodes[id]!.consumes.append(member)
            }
            for member in members {
                if let outcome = nodes[member]!.outcome { receive(id, from: member, outcome) }
            }
        case .join(_, let members):
            // A join registers on its members in order. Once a member decides it, it withdraws
            // from the members before (as its completion does) and counts as a consumer of each
            // later one that withdrew as it arrived: one that nothing else consumes is cancelled
            // (a deferred one without starting).
            for member in members {
                if nodes[id]!.outcome != nil {
                    withdrawAsItArrives(from: member)
                    continue
                }
                demand(member)
                if let outcome = nodes[member]!.outcome {
                    receive(id, from: member, outcome)
                } else {
                    nodes[member]!.dependents.append(id)
                    nodes[member]!.consumers.append(id)
                    nodes[id]!.consumes.append(member)
                }
            }
        case .deferred:
            break
        }
        if case .timeout(_, let seconds) = kind, nodes[id]!.outcome == nil {
            if seconds <= 0 {
                complete(id, .failure(.timedOut))
            } else {
                nodes[id]!.timerArmed = true
                nodes[id]!.deadline = now + seconds
                nodes[id]!.armedOrder = timersArmed
                timersArmed += 1
            }
        }
        if observed { demand(id) }
    }

    /// Starts a deferred future that is needed now.
    private mutating func demand(_ id: Int) {
        // A deferred future cancelled before it starts never runs its body.
        guard case .deferred(let inner) = nodes[id]!.kind, !nodes[id]!.started, nodes[id]!.outcome == nil else { return }
        nodes[id]!.started = true
        nodes[id]!.closureRuns += 1
        if nodes[id]!.outcome == nil { adopt(id, inner) }
    }

    /// `id` waits for `source`; a consumer also counts toward `source`'s consumers.
    private mutating func listen(_ id: Int, to source: Int, asConsumer: Bool) {
        demand(source)
        if let outcome = nodes[source]!.outcome {
            receive(id, from: source, outcome)
            return
        }
        nodes[source]!.dependents.append(id)
        if asConsumer {
            nodes[source]!.consumers.append(id)
            nodes[id]!.consumes.append(source)
        }
    }

    /// A consumer that withdraws as it arrives: cancels `source` if nothing else consumes it.
    private mutating func withdrawAsItArrives(from source: Int) {
        let node = nodes[source]!
        if node.outcome == nil, node.consumers.allSatisfy(node.withdrawn.contains) { complete(source, .cancelled) }
    }

    /// `id` follows `other` (a promise's `complete(with:)`, a `flatMap`, a deferred future).
    private mutating func adopt(_ id: Int, _ other: Int) {
        nodes[other]!.adopted = true
        listen(id, to: other, asConsumer: true)
    }

    /// `id` hears that `source` completed with `outcome`.
    private mutating func receive(_ id: Int, from source: Int, _ outcome: ModelOutcome) {
        guard nodes[id]!.outcome == nil else { return }
        if case .join = nodes[id]!.kind { nodes[id]!.heard[source] = outcome }
        switch nodes[id]!.kind {
        case .value, .failed:
            preconditionFailure("a completed future waits for nothing")
        case .promise, .guardedPromise, .deferred, .observe, .cancellable, .timeout:
            complete(id, outcome)
        case .map:
            guard case .success(let value) = outcome else { return complete(id, outcome) }
            nodes[id]!.closureRuns += 1
            do { complete(id, .success(try Closures.map(value))) } catch {
                complete(id, .failure(.error((error as! ModelError).code)))
            }
        case .flatMap(let upstream, let inner):
            guard source == upstream, case .success = outcome else { return complete(id, outcome) }
            nodes[id]!.closureRuns += 1
            adopt(id, inner)
        case .recover:
            guard case .failure(let failure) = outcome else { return complete(id, outcome) }
            nodes[id]!.closureRuns += 1
            complete(id, .success(Closures.recover(failure)))
        case .mapOutcome:
            nodes[id]!.closureRuns += 1
            complete(id, .success(Closures.mapOutcome(outcome)))
        case .join(.all, let members), .join(.zip, let members):
            switch outcome {
            case .failure: complete(id, outcome)
            case .cancelled: complete(id, .failure(.cancelledMember))
            case .success:
                let values = members.compactMap { member -> Int? in
                    if case .success(let value) = nodes[member]!.outcome { return value }
                    return nil
                }
                if values.count == members.count { complete(id, .success(values.reduce(0, +))) }
            }
        case .join(.race, let members):
            if outcome != .cancelled { return complete(id, outcome) }
            if members.allSatisfy({ nodes[$0]!.outcome == .cancelled }) { complete(id, .cancelled) }
        case .join(.any, let members):
            // The first success wins; members cancelled from outside are ignored unless all are.
            if case .success = outcome { return complete(id, outcome) }
            let outcomes = members.compactMap { nodes[id]!.heard[$0] }
            guard outcomes.count == members.count else { return }
            if outcomes.allSatisfy({ $0 == .cancelled }) { return complete(id, .cancelled) }
            let failures = outcomes.enumerated().compactMap { index, outcome -> (Int, ModelFailure)? in
                if case .failure(let failure) = outcome { return (index, failure) }
                return nil
            }
            complete(id, .failure(.joined(indices: failures.map(\.0), failures: failures.map(\.1))))
        case .join(let join, let members):
            let outcomes = members.compactMap { nodes[id]!.heard[$0] }
            if outcomes.count == members.count { complete(id, Closures.settle(join, outcomes)) }
        }
    }

    /// The one place a future completes: it tells its dependents, and withdraws from every pending
    /// future it was a consumer of, which cancels those whose consumers have all withdrawn.
    private mutating func complete(_ id: Int, _ outcome: ModelOutcome) {
        guard nodes[id]!.outcome == nil else { return }
        nodes[id]!.outcome = outcome
        nodes[id]!.timerArmed = false
        if case .success = outcome { nodes[id]!.progress = 1 }
        for source in nodes[id]!.consumes where nodes[source]!.outcome == nil {
            nodes[source]!.withdrawn.insert(id)
            nodes[source]!.dependents.removeAll { $0 == id }
            if nodes[source]!.consumers.allSatisfy(nodes[source]!.withdrawn.contains) {
                complete(source, .cancelled)
            }
        }
        for dependent in nodes[id]!.dependents { receive(dependent, from: id, outcome) }
        for token in nodes[id]!.completionTokens { cancel(token: token) }
    }
}
