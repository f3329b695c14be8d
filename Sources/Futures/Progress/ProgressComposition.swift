/// Progress composition: how a future's progress follows from the futures that drive it, and how
/// an adoption (a merge, or waiting on an adopted future) changes that.

import Foundation

/// How a future's progress derives from the future that drives it (its *subject*: itself, or after
/// merges the adopted future it was merged with): the subject's own (or upstream's) progress
/// weighted by `weight` for a flatMap, or `weight + (1 - weight) * innerPart` once the subject has
/// adopted a future it waits on; merges compose as `offset + scale * subject`.
@usableFromInline
struct ProgressRelation {
    var weight: Double?
    var ownPart = 0.0
    var innerPart = 0.0
    var adopted = false
    var offset = 0.0
    var scale = 1.0
    /// The weights folded into `offset` and `scale`, one per depth of the merge set, so that a split
    /// can give each part the weights of its own depths.
    var factors = DepthFactors()
    /// Combined progress never goes backwards; a producer's own progress may.
    var monotonic = false

    /// A fresh future's relation: a plain flatMap weighs its two steps equally.
    static func initial(combines: Bool) -> ProgressRelation {
        var relation = ProgressRelation()
        if combines { relation.setWeight(0.5) }
        return relation
    }

    mutating func setWeight(_ weight: Double) {
        self.weight = weight
        monotonic = true
    }

    var raw: Double {
        let subject: Double
        if adopted {
            let w = weight ?? 0
            subject = w + (1 - w) * innerPart
        } else {
            subject = (weight ?? 1) * ownPart
        }
        // Within 0...1 whatever the rounding of the products (a chain of weights can reach
        // 1.0000000000000002).
        return min(1, max(0, offset + scale * subject))
    }

    /// This future adopted `target` by merging: fold this future's weight into the composition
    /// and make the target the subject.
    mutating func absorb(_ target: ProgressRelation) {
        let w = weight ?? 0
        offset += scale * w
        scale *= 1 - w
        factors.append(1 - w)
        factors.append(contentsOf: target.factors)
        offset += scale * target.offset
        scale *= target.scale
        weight = target.weight
        adopted = target.adopted
        ownPart = target.ownPart
        innerPart = target.innerPart
        monotonic = monotonic || target.monotonic
    }

    /// This relation cut at `depth` of its merge set: the part above drives the depths above it
    /// and then waits, the part below drives the future that takes the depths from `depth` down,
    /// with the subject. Composing the two gives this relation back.
    func split(at depth: Int) -> (above: ProgressRelation, below: ProgressRelation) {
        let (prefix, suffix) = factors.split(at: depth)
        var below = self
        below.factors = suffix
        below.scale = suffix.product
        below.offset = 1 - below.scale
        var above = ProgressRelation(monotonic: monotonic)
        above.factors = prefix
        above.scale = prefix.product
        above.offset = 1 - above.scale
        return (above, below)
    }

    private init(monotonic: Bool) {
        self.monotonic = monotonic
    }

    init() {}

    /// The subject adopted a future it waits on, which already had `innerProgress`.
    mutating func adoptWaiting(innerProgress: Double) {
        adopted = true
        innerPart = innerProgress
    }
}

/// The factors of a merge set's depths, from its first future down: a `flatMap` of weight `w` at
/// depth `d` makes the progress at `d` equal to `w + (1 - w) * p`, where `p` is the progress at
/// `d + 1`, that is `1 - (1 - w) * (1 - p)`; its factor is `1 - w`. The progress at any depth is
/// then `1 - f * (1 - s)`, where `f` is the product of the factors from there down and `s` the
/// subject's own.
///
/// Kept in runs of equal factors, the first inline, so that a recursive loop, whose levels all
/// have the same weight, stores one run however deep it goes and allocates nothing. A set with
/// more than ``maximumRuns`` runs (weights that keep changing from level to level) folds its two
/// shallowest neighbouring runs (both zero or both not) into one with their product and their
/// geometric mean as each depth's factor: the product of every range of whole runs stays exact,
/// and a split inside a folded run gets the mean's share.
struct DepthFactors {
    struct Run: Equatable {
        var factor: Double
        var count: Int
    }

    static let maximumRuns = 16

    private var head = Run(factor: 1, count: 0)
    private var tail: [Run] = []
    /// The number of depths.
    private(set) var count = 0

    var runs: [Run] { count == 0 ? [] : [head] + tail }

    mutating func append(_ factor: Double, count depths: Int = 1) {
        guard depths > 0 else { return }
        defer { count += depths }
        if count == 0 {
            head = Run(factor: factor, count: depths)
        } else if tail.isEmpty ? head.factor == factor : tail[tail.count - 1].factor == factor {
            if tail.isEmpty { head.count += depths } else { tail[tail.count - 1].count += depths }
        } else {
            tail.append(Run(factor: factor, count: depths))
            if tail.count >= Self.maximumRuns { foldShallowestPair() }
        }
    }

    mutating func append(contentsOf other: DepthFactors) {
        guard other.count > 0 else { return }
        append(other.head.factor, count: other.head.count)
        for run in other.tail { append(run.factor, count: run.count) }
    }

    /// The product of every factor: what the progress at the first depth scales the subject's
    /// remaining part by.
    var product: Double {
        guard count > 0 else { return 1 }
        return tail.reduce(pow(head.factor, Double(head.count))) { $0 * pow($1.factor, Double($1.count)) }
    }

    /// The factors of the depths above `depth`, and those from `depth` down.
    func split(at depth: Int) -> (DepthFactors, DepthFactors) {
        var above = DepthFactors(), below = DepthFactors()
        guard count > 0 else { return (above, below) }
        var passed = 0
        // The head, then the tail, in place: `runs` would build an array at every split.
        func cut(_ run: Run) {
            let upper = min(max(depth - passed, 0), run.count)
            above.append(run.factor, count: upper)
            below.append(run.factor, count: run.count - upper)
            passed += run.count
        }
        cut(head)
        for index in 0..<tail.count { cut(tail[index]) }
        return (above, below)
    }

    /// Folds the shallowest two neighbouring runs that are both zero or both not: a zero factor
    /// (a weight of 1) folded into others would make every depth of the folded run zero, and a
    /// split inside it would then report 1. With no such pair, nothing is folded.
    private mutating func foldShallowestPair() {
        if (head.factor == 0) == (tail[0].factor == 0) {
            head = Self.fold(head, tail.removeFirst())
            return
        }
        for index in 0..<(tail.count - 1) where (tail[index].factor == 0) == (tail[index + 1].factor == 0) {
            tail[index] = Self.fold(tail[index], tail.remove(at: index + 1))
            return
        }
    }

    private static func fold(_ first: Run, _ second: Run) -> Run {
        let total = first.count + second.count
        guard first.factor > 0, second.factor > 0 else { return Run(factor: 0, count: total) }
        let meanLog = (Double(first.count) * log(first.factor) + Double(second.count) * log(second.factor)) / Double(total)
        return Run(factor: exp(meanLog), count: total)
    }
}

/// What an adoption changed in the adopter's progress, for after the locks: the new value and
/// version if it changed, the observers to tell, and whether the adopter followed its old upstream
/// (it then follows the new one).
typealias ProgressChange = (
    changed: (Double, UInt64)?, observers: ProgressObservers, refollow: Bool,
    unfollow: (source: ConsumerSource, follower: ObjectIdentifier)?
)

extension FutureStorage {
    /// This adopter merges `target`: the target drives the merged future from now on, composed
    /// after this one's weight (both futures' locks held). Returns `nil` when neither uses progress
    /// (the relation is recorded in the extras box, which the adoption allocates anyway).
    final func composeProgressOnMerge(with target: FutureStorage<Value>) -> ProgressChange? {
        var relation = takeCurrentRelation()
        relation.absorb(target.currentRelation)
        guard progress != nil || target.progress != nil else {
            ensureExtras.progressRelation = relation
            return nil
        }
        let state = ensureProgress
        state.relation = relation
        // The target's observers move here. They last saw the target's value, this future's own saw
        // this one's: each group hears the merged value if it differs from what it last saw, and
        // combined progress does not go back for either.
        let ownObservers = state.observers
        let ownSaw = state.value
        var moved = ProgressObservers()
        var movedSaw = 0.0
        // A target that followed its upstream leaves its listener there (this future follows that
        // upstream itself from now on, if it is to).
        var unfollow: (source: ConsumerSource, follower: ObjectIdentifier)? = nil
        if let targetState = target.progress {
            if targetState.forwarding, let source = target.upstream { unfollow = (source, ObjectIdentifier(target)) }
            moved = targetState.observers
            movedSaw = targetState.value
            state.takeObservers(of: targetState)
            state.forwarding = state.forwarding || targetState.forwarding
            // Observers drop any version not newer than the last they saw: the merged future's
            // versions continue after the newer of the two, or they would drop its reports (the
            // final 1.0 included).
            state.version = max(state.version, targetState.version)
        }
        let refollow = state.forwarding
        state.forwarding = false
        let bumped = state.update(atLeast: movedSaw) != nil
        let told = (state.value != ownSaw ? ownObservers : []) + (state.value != movedSaw ? moved : [])
        guard !told.isEmpty else { return (nil, [], refollow, unfollow) }
        if !bumped { state.version += 1 }
        return ((state.value, state.version), told, refollow, unfollow)
    }

    /// This adopter waits on a future whose progress is `innerProgress` (both futures' locks held).
    final func composeProgressOnWait(innerProgress: Double) -> ProgressChange? {
        var relation = currentRelation
        relation.adoptWaiting(innerProgress: innerProgress)
        guard let state = progress else {
            ensureExtras.progressRelation = relation
            return nil
        }
        state.relation = relation
        return state.restartFollowing()
    }
}

extension ProgressState {
    /// After an adoption changed the relation: the upstream changed, so a future that followed the
    /// old one follows the new one (after the locks); recomputes the value.
    fileprivate func restartFollowing() -> ProgressChange {
        let refollow = forwarding
        forwarding = false
        let changed = update()
        return (changed, changed == nil ? [] : observers, refollow, nil)
    }
}
