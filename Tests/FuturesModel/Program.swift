/// A random program over the public API: futures made from promises, completed values and
/// transforms of earlier futures, and actions on them. Every node and token has an id; a step only
/// names ids made by earlier steps, so deleting a step and every step that names what it made
/// leaves a valid program (which is how a failure shrinks).
public struct Program: Sendable, Equatable, CustomStringConvertible {
    public var steps: [Step]

    public init(steps: [Step]) { self.steps = steps }

    public var description: String {
        steps.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
    }
}

/// Where a callback or an action runs.
public enum Place: Int, Sendable, CaseIterable, CustomStringConvertible {
    case immediate, queueA, queueB, global, hopping, current

    public var description: String {
        switch self {
        case .immediate: ".immediate"
        case .queueA: ".queue(A)"
        case .queueB: ".queue(B)"
        case .global: ".global()"
        case .hopping: "a custom executor on a random queue"
        case .current: ".current"
        }
    }
}

public enum JoinKind: Sendable, Equatable, CaseIterable {
    /// `Future.all(members)` (fail fast), summed.
    case all
    /// `Future.all(members, policy: .collectErrors)`, summed.
    case allCollectingErrors
    /// `Future.all(members, policy: .ignoreErrors)`, summed.
    case allIgnoringErrors
    /// `Future.allSettled(members)`, folded by ``Closures/settled(_:)``.
    case allSettled
    /// `Future.allOrNil(members)`, folded by ``Closures/orNil(_:)``.
    case allOrNil
    /// `Future.race(members)`.
    case race
    /// `Future.any(members)`.
    case any
    /// `Future.zip` of two or three members, summed.
    case zip

    /// Whether the join waits for every member, whatever they end in.
    var waitsForAll: Bool {
        switch self {
        case .allCollectingErrors, .allIgnoringErrors, .allSettled, .allOrNil: true
        case .all, .race, .any, .zip: false
        }
    }
}

/// How a token other than a plain source's is made.
public enum TokenKind: Sendable, Equatable {
    /// `CancellationSource(linkedTo: token)`: a source of its own, which `token` cancels too.
    case linked(Int)
    /// `CancellationToken.either(a, b)`.
    case either(Int, Int)
    /// `CancellationToken.both(a, b)`.
    case both(Int, Int)
    /// `future(node).completionToken`.
    case completion(of: Int)

    /// The tokens this one is made from.
    public var tokens: [Int] {
        switch self {
        case .linked(let parent): [parent]
        case .either(let a, let b), .both(let a, let b): [a, b]
        case .completion: []
        }
    }

    /// Whether `cancelSource` can cancel it (it has a source of its own).
    public var hasSource: Bool {
        if case .linked = self { return true }
        return false
    }
}

/// How a node's future is made.
public enum NodeKind: Sendable, Equatable {
    case promise
    case value(Int)
    case failed(Int)
    case map(Int)
    case flatMap(Int, inner: Int)
    case recover(Int)
    case mapOutcome(Int)
    case observe(Int)
    case cancellable(Int, token: Int)
    case timeout(Int, seconds: Int)
    case join(JoinKind, [Int])
    case deferred(inner: Int)
    /// `Promise(cancelledBy: token)`.
    case guardedPromise(token: Int)

    /// Whether a program holds a promise for this node.
    public var isPromise: Bool {
        switch self {
        case .promise, .guardedPromise: true
        default: false
        }
    }

    /// The token this node's future is cancelled by, if any.
    public var token: Int? {
        switch self {
        case .cancellable(_, let token), .guardedPromise(let token): token
        default: nil
        }
    }

    /// The nodes this one is made from (its sources, and the future it will adopt).
    public var inputs: [Int] {
        switch self {
        case .promise, .value, .failed, .guardedPromise: []
        case .map(let s), .recover(let s), .mapOutcome(let s), .observe(let s), .cancellable(let s, _),
             .timeout(let s, _):
            [s]
        case .flatMap(let s, let inner): [s, inner]
        case .join(_, let members): members
        case .deferred(let inner): [inner]
        }
    }
}

public enum Step: Sendable, Equatable, CustomStringConvertible {
    /// Makes node `id`; callbacks run on `place`; `observed` registers a completion observer and a
    /// progress handler (which also starts a deferred future).
    case make(id: Int, NodeKind, place: Place, observed: Bool)
    /// Makes a cancellation source `id`.
    case makeSource(id: Int)
    /// Makes token `id` from earlier tokens or from a node.
    case makeToken(id: Int, TokenKind)
    case succeed(Int, Int)
    case fail(Int, Int)
    /// `promise(node).complete(with: future(other))`.
    case completeWith(Int, Int)
    /// Releases the promise of a node.
    case dropPromise(Int)
    case setProgress(Int, Double)
    case cancel(Int)
    /// `promise(node).cancel()`: the producer gives up.
    case cancelPromise(Int)
    case cancelSource(Int)
    case advance(seconds: Int)

    /// The ids this step names (made or used).
    public var ids: [Int] {
        switch self {
        case .make(let id, let kind, _, _):
            var ids = [id] + kind.inputs
            if let token = kind.token { ids.append(token) }
            return ids
        case .makeSource(let id): return [id]
        case .makeToken(let id, let kind):
            if case .completion(let node) = kind { return [id, node] }
            return [id] + kind.tokens
        case .succeed(let n, _), .fail(let n, _), .dropPromise(let n), .setProgress(let n, _), .cancel(let n),
             .cancelPromise(let n), .cancelSource(let n):
            return [n]
        case .completeWith(let n, let other): return [n, other]
        case .advance: return []
        }
    }

    public var made: Int? {
        switch self {
        case .make(let id, _, _, _), .makeSource(let id), .makeToken(let id, _): id
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .make(let id, let kind, let place, let observed):
            "n\(id) = \(kind)\(place == .immediate ? "" : " on \(place)")\(observed ? ", observed" : "")"
        case .makeSource(let id): "t\(id) = CancellationSource()"
        case .makeToken(let id, .linked(let parent)): "t\(id) = CancellationSource(linkedTo: t\(parent))"
        case .makeToken(let id, .either(let a, let b)): "t\(id) = CancellationToken.either(t\(a), t\(b))"
        case .makeToken(let id, .both(let a, let b)): "t\(id) = CancellationToken.both(t\(a), t\(b))"
        case .makeToken(let id, .completion(let node)): "t\(id) = n\(node).completionToken"
        case .succeed(let n, let v): "promise n\(n).succeed(\(v))"
        case .fail(let n, let c): "promise n\(n).fail(ModelError(\(c)))"
        case .completeWith(let n, let other): "promise n\(n).complete(with: n\(other))"
        case .dropPromise(let n): "release promise n\(n)"
        case .setProgress(let n, let p): "promise n\(n).progress = \(p)"
        case .cancel(let n): "n\(n).cancel()"
        case .cancelPromise(let n): "promise n\(n).cancel()"
        case .cancelSource(let t): "t\(t).cancel()"
        case .advance(let s): "clock.advance(by: .seconds(\(s)))"
        }
    }
}

/// The error the programs fail futures with.
public struct ModelError: Error, Equatable, Sendable {
    public var code: Int
    public init(_ code: Int) { self.code = code }
}

/// SplitMix64: small, fast, and the same sequence for the same seed on every platform.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: - Generating

extension Program {
    /// A random program of about `length` steps.
    ///
    /// The programs stay inside what the rules decide. Two inputs of one join (or a `flatMap`'s
    /// source and the future it adopts) never share an ancestor, a cancellation source or the clock:
    /// one step can then never complete two of them, and which of two simultaneous completions a
    /// join sees first is the executors' business, not the rules'. A promise only adopts a future
    /// made before it, so no program closes a cycle.
    ///
    /// Besides single operations, a program grows structures several levels deep and ends them:
    /// joins of every kind whose members include the latest join (or deferred future, or guarded
    /// future) and fresh producers, deferred futures of those, chains of tokens made from tokens,
    /// and steps that end a structure from the outside (cancelling its outermost future) or from
    /// the inside (completing, failing, cancelling or dropping one of the promises it rests on).
    public static func random(seed: UInt64, length: Int = 30) -> Program {
        var random = SeededRandom(seed: seed)
        var steps: [Step] = []
        var nodes: [Int] = []
        var promises: [Int] = []
        var sources: [Int] = []
        var tokens: [Int] = []
        // The structures: the joins, deferred and guarded futures the nesting steps build, each
        // with its depth and the promises below it.
        var composites: [Int] = []
        var depth: [Int: Int] = [:]
        var leaves: [Int: Set<Int>] = [:]
        var adopted: Set<Int> = []
        var nextID = 0
        func fresh() -> Int { defer { nextID += 1 }; return nextID }
        func pick(_ ids: [Int]) -> Int? { ids.isEmpty ? nil : ids[Int.random(in: 0..<ids.count, using: &random)] }
        func place() -> Place { Place.allCases[Int.random(in: 0..<Place.allCases.count, using: &random)] }
        func observed() -> Bool { Int.random(in: 0..<4, using: &random) != 0 }
        func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }
        /// Mostly the latest, else any: so chains grow deep but branch too.
        func recent(_ ids: [Int]) -> Int? { chance(70) ? ids.last : pick(ids) }
        /// The structure to build on: one not adopted yet (only its adopter may use it), not too deep.
        func top() -> Int? { recent(composites.filter { !adopted.contains($0) && depth[$0, default: 0] < maxNesting }) }
        /// A fresh producer to join with a structure, and the steps that make it (ids in the order
        /// made, as everywhere: a promise adopts only futures with smaller ids).
        func freshMember() -> (Int, [Step]) {
            switch Int.random(in: 0..<8, using: &random) {
            case 0 where !tokens.isEmpty:
                let id = fresh()
                return (id, [.make(id: id, .guardedPromise(token: recent(tokens)!), place: .immediate, observed: observed())])
            case 1:
                let inner = fresh()
                let id = fresh()
                return (id, [
                    .make(id: inner, .promise, place: .immediate, observed: observed()),
                    .make(id: id, .deferred(inner: inner), place: .immediate, observed: chance(30)),
                ])
            case 2:
                let source = fresh()
                let id = fresh()
                return (id, [
                    .make(id: source, .promise, place: .immediate, observed: observed()),
                    .make(id: id, Bool.random(using: &random) ? .map(source) : .mapOutcome(source), place: place(),
                          observed: observed()),
                ])
            default:
                let id = fresh()
                return (id, [.make(id: id, .promise, place: .immediate, observed: observed())])
            }
        }

        while steps.count < length {
            let roll = Int.random(in: 0..<133, using: &random)
            var batch: [Step] = []
            var candidate: Step?
            switch roll {
            case 0..<14:
                let id = fresh()
                candidate = .make(id: id, .promise, place: .immediate, observed: observed())
            case 14..<17:
                let id = fresh()
                let kind: NodeKind = Bool.random(using: &random)
                    ? .value(Int.random(in: 0..<50, using: &random)) : .failed(Int.random(in: 0..<10, using: &random))
                candidate = .make(id: id, kind, place: .immediate, observed: observed())
            case 17..<20:
                candidate = .makeSource(id: fresh())
            case 20..<46:
                guard let source = pick(nodes) else { continue }
                let kind: NodeKind
                switch Int.random(in: 0..<7, using: &random) {
                case 0, 1: kind = .map(source)
                case 2: kind = .recover(source)
                case 3: kind = .mapOutcome(source)
                case 4: kind = .observe(source)
                case 5:
                    guard let token = pick(tokens) else { continue }
                    kind = .cancellable(source, token: token)
                default: kind = .timeout(source, seconds: Int.random(in: 0...3, using: &random))
                }
                candidate = .make(id: fresh(), kind, place: place(), observed: observed())
            case 46..<52:
                guard let source = pick(nodes), let inner = pick(nodes) else { continue }
                candidate = .make(id: fresh(), .flatMap(source, inner: inner), place: place(), observed: observed())
            case 52..<58:
                let count = Int.random(in: 2...3, using: &random)
                var members: [Int] = []
                for _ in 0..<count { if let member = pick(nodes), !members.contains(member) { members.append(member) } }
                guard members.count >= 2 else { continue }
                let join = JoinKind.allCases[Int.random(in: 0..<JoinKind.allCases.count, using: &random)]
                candidate = .make(id: fresh(), .join(join, members), place: .immediate, observed: observed())
            case 58..<61:
                guard let inner = pick(nodes) else { continue }
                candidate = .make(id: fresh(), .deferred(inner: inner), place: .immediate, observed: observed())
            case 61..<70:
                guard let promise = pick(promises) else { continue }
                candidate = .succeed(promise, Int.random(in: 0..<50, using: &random))
            case 70..<75:
                guard let promise = pick(promises) else { continue }
                candidate = .fail(promise, Int.random(in: 0..<10, using: &random))
            case 75..<79:
                guard let promise = pick(promises), let other = pick(nodes.filter { $0 < promise }) else { continue }
                candidate = .completeWith(promise, other)
            case 79..<82:
                guard let promise = pick(promises) else { continue }
                candidate = .dropPromise(promise)
            case 82..<86:
                guard let promise = pick(promises) else { continue }
                let levels: [Double] = [0.1, 0.25, 0.5, 0.75, 0.9, -1, 2, .nan]
                candidate = .setProgress(promise, levels[Int.random(in: 0..<levels.count, using: &random)])
            case 86..<93:
                guard let node = pick(nodes) else { continue }
                candidate = .cancel(node)
            case 93..<96:
                guard let source = pick(sources) else { continue }
                candidate = .cancelSource(source)
            case 96..<100:
                candidate = .advance(seconds: Int.random(in: 1...2, using: &random))
            case 100..<110:
                // A join of the latest structure (or of fresh producers, to start one) with others.
                var members: [Int] = []
                if let top = top() { members.append(top) } else {
                    let (member, made) = freshMember()
                    members.append(member)
                    batch += made
                }
                for _ in 0..<Int.random(in: 1...2, using: &random) {
                    if chance(70) {
                        let (member, made) = freshMember()
                        members.insert(member, at: Int.random(in: 0...members.count, using: &random))
                        batch += made
                    } else if let other = pick(nodes), !members.contains(other) {
                        members.insert(other, at: Int.random(in: 0...members.count, using: &random))
                    }
                }
                guard members.count >= 2 else { continue }
                let join = JoinKind.allCases[Int.random(in: 0..<JoinKind.allCases.count, using: &random)]
                batch.append(.make(id: fresh(), .join(join, members), place: .immediate, observed: observed()))
            case 110..<115:
                // A deferred future of the latest structure: of a deferred one, it nests.
                guard let inner = top() else { continue }
                candidate = .make(id: fresh(), .deferred(inner: inner), place: .immediate, observed: chance(50))
            case 115..<125:
                // A token made from tokens, or a future one guards.
                guard tokens.count >= 2, let token = recent(tokens) else {
                    candidate = .makeSource(id: fresh())
                    break
                }
                switch Int.random(in: 0..<8, using: &random) {
                case 0: candidate = .makeToken(id: fresh(), .linked(token))
                case 1, 2:
                    guard let other = pick(tokens), other != token else { continue }
                    candidate = .makeToken(id: fresh(), .either(token, other))
                case 3, 4:
                    guard let other = pick(tokens), other != token else { continue }
                    candidate = .makeToken(id: fresh(), .both(token, other))
                case 5:
                    guard let node = top() ?? pick(nodes) else { continue }
                    candidate = .makeToken(id: fresh(), .completion(of: node))
                case 6:
                    guard let source = top() ?? pick(nodes) else { continue }
                    candidate = .make(id: fresh(), .cancellable(source, token: token), place: place(), observed: observed())
                default:
                    candidate = .make(id: fresh(), .guardedPromise(token: token), place: .immediate, observed: observed())
                }
            default:
                // Ends a structure: from the outside, or at one of the promises it rests on.
                guard let structure = recent(composites) else { continue }
                let inside = leaves[structure, default: []].sorted()
                if chance(40) || inside.isEmpty {
                    if chance(20), let source = recent(sources) {
                        candidate = .cancelSource(source)
                    } else {
                        candidate = .cancel(structure)
                    }
                    break
                }
                guard let promise = pick(inside) else { continue }
                switch Int.random(in: 0..<6, using: &random) {
                case 0, 1: candidate = .succeed(promise, Int.random(in: 0..<50, using: &random))
                case 2: candidate = .fail(promise, Int.random(in: 0..<10, using: &random))
                case 3: candidate = .cancelPromise(promise)
                case 4: candidate = .cancel(promise)
                default: candidate = .dropPromise(promise)
                }
            }
            if let candidate { batch.append(candidate) }
            guard !batch.isEmpty, steps.count + batch.count <= max(length, steps.count + 1) else { continue }
            let extended = Program(steps: steps + batch)
            guard extended.isWellFormed else { continue }
            steps = extended.steps
            for step in batch {
                switch step {
                case .make(let id, let kind, _, _):
                    nodes.append(id)
                    if kind.isPromise { promises.append(id) }
                    var below = Set<Int>()
                    var level = 0
                    for input in kind.inputs {
                        below.formUnion(leaves[input, default: []])
                        level = max(level, depth[input, default: 0])
                    }
                    if kind.isPromise { below.insert(id) }
                    leaves[id] = below
                    switch kind {
                    case .join, .deferred, .cancellable, .guardedPromise:
                        composites.append(id)
                        depth[id] = level + 1
                    default: depth[id] = level
                    }
                    switch kind {
                    case .flatMap(_, let inner), .deferred(let inner): adopted.insert(inner)
                    default: break
                    }
                case .makeSource(let id):
                    sources.append(id)
                    tokens.append(id)
                case .makeToken(let id, let kind):
                    if kind.hasSource { sources.append(id) }
                    tokens.append(id)
                default: break
                }
            }
        }
        return Program(steps: steps)
    }

    /// How deep the generator nests joins, deferred and guarded futures: enough for the rules at
    /// every level, not so deep that a program tests the stack rather than the rules.
    static let maxNesting = 8

    /// Whether the inputs of every join and `flatMap` are independent (see ``random(seed:length:)``),
    /// counting the futures promises adopt and the ties consumers and tokens make, no token guards
    /// a future below another it guards (or a future its own cancellation depends on), and nothing
    /// uses a `flatMap`'s or deferred future's inner future after that adoption is made.
    public var isWellFormed: Bool {
        // Such an adoption happens after the closure returns, on the closure's executor, after the
        // step that runs it seems done to the runner (it counts the closure's run): a later step's
        // consumer that registers and leaves at once (a race already decided) could cancel the
        // inner future before the adoption makes it a consumer, or after. The rules leave that
        // timing open. A promise's `complete(with:)` adopts within its step, so its future is
        // shared freely, and later registrants on it split it off its adopter.
        //
        // A `flatMap` off `.immediate` adopts after its step, on its executor: an inner future that
        // an earlier step consumes (a join's member, say) may be left by that consumer later (the
        // join cancelled, or decided by another member) before that adoption or after it, and only
        // then is it cancelled. So such an inner future must be new to every earlier step too.
        var adoptedLater: Set<Int> = []
        var usedBefore: Set<Int> = []
        for step in steps {
            var used: [Int] = []
            switch step {
            case .make(_, let kind, _, _): used = kind.inputs
            case .completeWith(_, let other): used = [other]
            case .cancel(let id), .cancelPromise(let id): used = [id]
            case .makeToken(_, .completion(let node)): used = [node]
            default: break
            }
            if used.contains(where: adoptedLater.contains) { return false }
            if case .make(_, .flatMap(_, let inner), let place, _) = step, place != .immediate,
               usedBefore.contains(inner) {
                return false
            }
            usedBefore.formUnion(used)
            if case .make(_, let kind, _, _) = step {
                switch kind {
                case .flatMap(_, let inner), .deferred(let inner): adoptedLater.insert(inner)
                default: break
                }
            }
        }
        // Everything a node depends on: its ancestors, with a token as `-1 - id` and the clock as
        // `Int.min`. A token made from others depends on them, and a completion token on its future.
        var ancestry: [Int: Set<Int>] = [:]
        var adopters: [Int: [Int]] = [:]  // promise -> adopted futures
        var kinds: [Int: NodeKind] = [:]
        for step in steps {
            switch step {
            case .make(let id, let kind, _, _):
                kinds[id] = kind
                var own: Set<Int> = [id]
                if let token = kind.token { own.insert(-1 - token) }
                if case .timeout = kind { own.insert(Int.min) }
                for input in kind.inputs { own.formUnion(ancestry[input] ?? [input]) }
                ancestry[id] = own
            case .makeToken(let id, let kind):
                var own: Set<Int> = [-1 - id]
                for token in kind.tokens { own.insert(-1 - token) }
                if case .completion(let node) = kind { own.insert(node) }
                ancestry[-1 - id] = own
            case .completeWith(let promise, let other):
                adopters[promise, default: []].append(other)
            default: break
            }
        }
        // With adoptions, a node's ancestry also holds what its ancestors adopted.
        func full(_ id: Int) -> Set<Int> {
            var visiting = Set<Int>()
            var result = Set<Int>()
            var pending = Array(ancestry[id] ?? [id])
            while let next = pending.popLast() {
                guard visiting.insert(next).inserted else { continue }
                result.insert(next)
                pending.append(contentsOf: ancestry[next] ?? [])
                pending.append(contentsOf: adopters[next] ?? [])
            }
            return result
        }
        // Futures tied by a consumer: when a consumer completes it withdraws from its sources, and
        // a source that nothing else needs is cancelled; so one step can complete futures that
        // share no ancestor but are tied through a consumer (a join that fails cancels its other
        // members, which reaches their other dependents). Ties, each made by one node.
        var ties: [(Int, Int, madeBy: Int)] = []
        for step in steps {
            switch step {
            case .make(let id, let kind, _, _):
                for input in kind.inputs { ties.append((id, input, id)) }
                if let token = kind.token { ties.append((id, -1 - token, id)) }
            case .makeToken(let id, let kind):
                // A token is tied to what cancels it, so to every future its sources guard.
                for token in kind.tokens { ties.append((-1 - id, -1 - token, -1 - id)) }
                if case .completion(let node) = kind { ties.append((-1 - id, node, -1 - id)) }
            case .completeWith(let promise, let other): ties.append((promise, other, promise))
            default: break
            }
        }
        for (id, kind) in kinds {
            let inputs: [Int]
            switch kind {
            case .join(_, let members): inputs = members
            case .flatMap(let source, let inner): inputs = [source, inner]
            // A token cancels its futures one after another, and a transform between two of them
            // on an executor that hops may run before the lower one is cancelled or not at all (it
            // withdrew); a future that completes cancels its completion token's futures in its
            // callbacks, which may run before or after its dependents hear of it: timing the rules
            // leave open. So a guarded future's source (or what a guarded promise adopts) and its
            // token are independent too.
            case .cancellable(let source, let token): inputs = [source, -1 - token]
            case .guardedPromise(let token): inputs = [-1 - token] + adopters[id, default: []]
            default: continue
            }
            var seen = Set<Int>()
            for input in inputs {
                let own = full(input)
                if !seen.isDisjoint(with: own) { return false }
                seen.formUnion(own)
            }
            // The inputs are tied by nothing but this node (whose own decision may withdraw from
            // all of them at once: that is the rule, not a race).
            let groups = TieGroups(ties.filter { $0.madeBy != id })
            if Set(inputs.map(groups.root)).count != inputs.count { return false }
        }
        return true
    }
}

/// Union-find over the futures a program ties together.
private struct TieGroups {
    private var parent: [Int: Int] = [:]

    init(_ ties: [(Int, Int, madeBy: Int)]) {
        for (a, b, _) in ties { union(a, b) }
    }

    func root(_ id: Int) -> Int {
        var id = id
        while let next = parent[id], next != id { id = next }
        return id
    }

    private mutating func union(_ a: Int, _ b: Int) {
        let (ra, rb) = (root(a), root(b))
        if ra != rb { parent[ra] = rb }
    }
}

// MARK: - Shrinking

extension Program {
    /// This program without step `index` and every later step that names an id it made.
    public func removing(_ index: Int) -> Program {
        var gone: Set<Int> = []
        if let made = steps[index].made { gone.insert(made) }
        var kept: [Step] = []
        for (offset, step) in steps.enumerated() where offset != index {
            if step.ids.contains(where: gone.contains) {
                if let made = step.made { gone.insert(made) }
                continue
            }
            kept.append(step)
        }
        return Program(steps: kept)
    }
}
