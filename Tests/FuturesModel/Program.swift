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

public enum JoinKind: Sendable, Equatable {
    /// `Future.all(members)` (fail fast), summed.
    case all
    /// `Future.race(members)`.
    case race
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

    /// The nodes this one is made from (its sources, and the future it will adopt).
    public var inputs: [Int] {
        switch self {
        case .promise, .value, .failed: []
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
    case succeed(Int, Int)
    case fail(Int, Int)
    /// `promise(node).complete(with: future(other))`.
    case completeWith(Int, Int)
    /// Releases the promise of a node.
    case dropPromise(Int)
    case setProgress(Int, Double)
    case cancel(Int)
    case cancelSource(Int)
    case advance(seconds: Int)

    /// The ids this step names (made or used).
    public var ids: [Int] {
        switch self {
        case .make(let id, let kind, _, _):
            var ids = [id] + kind.inputs
            if case .cancellable(_, let token) = kind { ids.append(token) }
            return ids
        case .makeSource(let id): return [id]
        case .succeed(let n, _), .fail(let n, _), .dropPromise(let n), .setProgress(let n, _), .cancel(let n),
             .cancelSource(let n):
            return [n]
        case .completeWith(let n, let other): return [n, other]
        case .advance: return []
        }
    }

    public var made: Int? {
        switch self {
        case .make(let id, _, _, _), .makeSource(let id): id
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .make(let id, let kind, let place, let observed):
            "n\(id) = \(kind)\(place == .immediate ? "" : " on \(place)")\(observed ? ", observed" : "")"
        case .makeSource(let id): "t\(id) = CancellationSource()"
        case .succeed(let n, let v): "promise n\(n).succeed(\(v))"
        case .fail(let n, let c): "promise n\(n).fail(ModelError(\(c)))"
        case .completeWith(let n, let other): "promise n\(n).complete(with: n\(other))"
        case .dropPromise(let n): "release promise n\(n)"
        case .setProgress(let n, let p): "promise n\(n).progress = \(p)"
        case .cancel(let n): "n\(n).cancel()"
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
    public static func random(seed: UInt64, length: Int = 30) -> Program {
        var random = SeededRandom(seed: seed)
        var steps: [Step] = []
        var nodes: [Int] = []
        var promises: [Int] = []
        var sources: [Int] = []
        var nextID = 0
        func fresh() -> Int { defer { nextID += 1 }; return nextID }
        func pick(_ ids: [Int]) -> Int? { ids.isEmpty ? nil : ids[Int.random(in: 0..<ids.count, using: &random)] }
        func place() -> Place { Place.allCases[Int.random(in: 0..<Place.allCases.count, using: &random)] }
        func observed() -> Bool { Int.random(in: 0..<4, using: &random) != 0 }

        while steps.count < length {
            let roll = Int.random(in: 0..<100, using: &random)
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
                    guard let token = pick(sources) else { continue }
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
                candidate = .make(
                    id: fresh(), .join(Bool.random(using: &random) ? .all : .race, members),
                    place: .immediate, observed: observed()
                )
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
            default:
                candidate = .advance(seconds: Int.random(in: 1...2, using: &random))
            }
            guard let step = candidate else { continue }
            let extended = Program(steps: steps + [step])
            guard extended.isWellFormed else { continue }
            steps.append(step)
            if case .make(let id, let kind, _, _) = step {
                nodes.append(id)
                if kind == .promise { promises.append(id) }
            }
            if case .makeSource(let id) = step { sources.append(id) }
        }
        return Program(steps: steps)
    }

    /// Whether the inputs of every join and `flatMap` are independent (see ``random(seed:length:)``),
    /// counting the futures promises adopt and the ties consumers make, no token guards a future
    /// below another it guards, and nothing uses a `flatMap`'s or deferred future's inner future
    /// after that adoption is made.
    public var isWellFormed: Bool {
        // Such an adoption happens after the closure returns, on the closure's executor, after the
        // step that runs it seems done to the runner (it counts the closure's run): a later step's
        // consumer that registers and leaves at once (a race already decided) could cancel the
        // inner future before the adoption makes it a consumer, or after. The rules leave that
        // timing open. A promise's `complete(with:)` adopts within its step, so its future is
        // shared freely, and later registrants on it split it off its adopter.
        var adoptedLater: Set<Int> = []
        for step in steps {
            var used: [Int] = []
            switch step {
            case .make(_, let kind, _, _): used = kind.inputs
            case .completeWith(_, let other): used = [other]
            case .cancel(let id): used = [id]
            default: break
            }
            if used.contains(where: adoptedLater.contains) { return false }
            if case .make(_, let kind, _, _) = step {
                switch kind {
                case .flatMap(_, let inner), .deferred(let inner): adoptedLater.insert(inner)
                default: break
                }
            }
        }
        // Everything a node depends on: its ancestors, with a cancellation source as `-1 - id` and
        // the clock as `Int.min`.
        var ancestry: [Int: Set<Int>] = [:]
        var adopters: [Int: [Int]] = [:]  // promise -> adopted futures
        var kinds: [Int: NodeKind] = [:]
        for step in steps {
            switch step {
            case .make(let id, let kind, _, _):
                kinds[id] = kind
                var own: Set<Int> = [id]
                if case .cancellable(_, let token) = kind { own.insert(-1 - token) }
                if case .timeout = kind { own.insert(Int.min) }
                for input in kind.inputs { own.formUnion(ancestry[input] ?? [input]) }
                ancestry[id] = own
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
        // One token cancels its futures one after another, and a transform between two of them
        // on an executor that hops may run before the lower one is cancelled or not at all (it
        // withdrew): timing the rules leave open. So a token guards no future below another it
        // guards.
        for (_, kind) in kinds {
            if case .cancellable(let source, let token) = kind, full(source).contains(-1 - token) { return false }
        }
        // Futures tied by a consumer: when a consumer completes it withdraws from its sources, and
        // a source that nothing else needs is cancelled; so one step can complete futures that
        // share no ancestor but are tied through a consumer (a join that fails cancels its other
        // members, which reaches their other dependents). Ties, each made by one node.
        var ties: [(Int, Int, madeBy: Int)] = []
        for step in steps {
            switch step {
            case .make(let id, let kind, _, _): for input in kind.inputs { ties.append((id, input, id)) }
            case .completeWith(let promise, let other): ties.append((promise, other, promise))
            default: break
            }
        }
        for (id, kind) in kinds {
            let inputs: [Int]
            switch kind {
            case .join(_, let members): inputs = members
            case .flatMap(let source, let inner): inputs = [source, inner]
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
