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
        case .unexpected: 2999
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
        /// For a timeout: whether its timer is armed.
        var timerArmed = false
        var deadline = 0
        var armedOrder = 0
        var observed = false
        /// Whether another future adopted this one (which may merge it into the adopter).
        public internal(set) var adopted = false
    }

    public private(set) var nodes: [Int: Node] = [:]
    var cancelledSources: Set<Int> = []
    var cancellableByToken: [Int: [Int]] = [:]
    var now = 0
    var timersArmed = 0

    public init() {}

    /// Armed timers: the sleepers the clock must have before it advances.
    public var armedTimers: Int { nodes.values.filter { $0.timerArmed }.count }

    public func outcome(_ id: Int) -> ModelOutcome? { nodes[id]?.outcome }

    // MARK: Steps

    /// Applies one step; returns what the step's call returns, if it returns a `Bool`.
    @discardableResult
    public mutating func apply(_ step: Step) -> Bool? {
        switch step {
        case .make(let id, let kind, _, let observed):
            make(id, kind, observed: observed)
            return nil
        case .makeSource:
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
        case .cancelSource(let token):
            guard cancelledSources.insert(token).inserted else { return false }
            for id in cancellableByToken[token] ?? [] where nodes[id]?.outcome == nil { complete(id, .cancelled) }
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

    private mutating func make(_ id: Int, _ kind: NodeKind, observed: Bool) {
        nodes[id] = Node(kind: kind, observed: observed)
        switch kind {
        case .promise: break
        case .value(let value): nodes[id]!.outcome = .success(value)
        case .failed(let code): nodes[id]!.outcome = .failure(.error(code))
        case .map(let source), .flatMap(let source, _), .recover(let source), .mapOutcome(let source),
             .timeout(let source, _):
            listen(id, to: source, asConsumer: true)
        case .observe(let source):
            listen(id, to: source, asConsumer: false)
        case .cancellable(let source, let token):
            if cancelledSources.contains(token) {
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
            cancellableByToken[token, default: []].append(id)
            listen(id, to: source, asConsumer: true)
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
        switch nodes[id]!.kind {
        case .value, .failed:
            preconditionFailure("a completed future waits for nothing")
        case .promise, .deferred, .observe, .cancellable, .timeout:
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
        case .join(.all, let members):
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
        case .join(_, let members):
            if outcome != .cancelled { return complete(id, outcome) }
            if members.allSatisfy({ nodes[$0]!.outcome == .cancelled }) { complete(id, .cancelled) }
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
    }
}
