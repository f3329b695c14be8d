/// Progress composition: how a future's progress follows from the futures that drive it, and how
/// an adoption (a merge, or waiting on an adopted future) changes that.

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
        return offset + scale * subject
    }

    /// This future adopted `target` by merging: fold this future's weight into the composition
    /// and make the target the subject.
    mutating func absorb(_ target: ProgressRelation) {
        let w = weight ?? 0
        offset += scale * w
        scale *= 1 - w
        offset += scale * target.offset
        scale *= target.scale
        weight = target.weight
        adopted = target.adopted
        ownPart = target.ownPart
        innerPart = target.innerPart
        monotonic = monotonic || target.monotonic
    }

    /// The subject adopted a future it waits on, which already had `innerProgress`.
    mutating func adoptWaiting(innerProgress: Double) {
        adopted = true
        innerPart = innerProgress
    }
}

/// What an adoption changed in the adopter's progress, for after the locks: the new value and
/// version if it changed, the observers to tell, and whether the adopter followed its old upstream
/// (it then follows the new one).
typealias ProgressChange = (
    changed: (Double, UInt64)?, observers: [ProgressObserver], refollow: Bool,
    unfollow: (source: any ConsumerSource, follower: ObjectIdentifier)?
)

extension FutureStorage {
    /// This adopter merges `target`: the target drives the merged future from now on, composed
    /// after this one's weight (both futures' locks held). Returns `nil` when neither uses progress
    /// (the relation is recorded in the extras box, which the adoption allocates anyway).
    final func composeProgressOnMerge(with target: FutureStorage<Value>) -> ProgressChange? {
        var relation = currentRelation
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
        var moved: [ProgressObserver] = []
        var movedSaw = 0.0
        // A target that followed its upstream leaves its listener there (this future follows that
        // upstream itself from now on, if it is to).
        var unfollow: (source: any ConsumerSource, follower: ObjectIdentifier)? = nil
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
