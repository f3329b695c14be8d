/// What a program builds, by name: which operators it uses and how deep its structures go, to
/// check that the generator makes what the model is about and to measure how often.
extension Program {
    /// The features of this program (each named once, however often it occurs).
    public var features: Set<String> {
        var features: Set<String> = []
        var kinds: [Int: NodeKind] = [:]
        var tokenKinds: [Int: TokenKind] = [:]
        // Levels of joins, deferred futures and tokens made from tokens.
        var joinDepth: [Int: Int] = [:]
        var deferredDepth: [Int: Int] = [:]
        var tokenDepth: [Int: Int] = [:]
        // The structures (joins, deferred and guarded futures) two levels deep or more, and the
        // promises below each.
        var below: [Int: Set<Int>] = [:]
        var structureDepth: [Int: Int] = [:]
        var endedOutside: Set<Int> = []
        var endedInside: Set<Int> = []
        for step in steps {
            switch step {
            case .make(let id, let kind, _, _):
                kinds[id] = kind
                var promises: Set<Int> = kind.isPromise ? [id] : []
                var level = 0
                for input in kind.inputs {
                    promises.formUnion(below[input, default: []])
                    level = max(level, structureDepth[input, default: 0])
                }
                below[id] = promises
                switch kind {
                case .join(let join, let members):
                    features.insert("join.\(join)")
                    joinDepth[id] = 1 + (members.map { joinDepth[$0, default: 0] }.max() ?? 0)
                    if joinDepth[id]! >= 2 { features.insert("join nested 2+ levels") }
                    if joinDepth[id]! >= 3 { features.insert("join nested 3+ levels") }
                    if joinDepth[id]! >= 4 { features.insert("join nested 4+ levels") }
                    structureDepth[id] = level + 1
                case .deferred(let inner):
                    features.insert("deferred")
                    deferredDepth[id] = 1 + deferredDepth[inner, default: 0]
                    if deferredDepth[id]! >= 2 { features.insert("deferred of deferred") }
                    if joinDepth[inner, default: 0] >= 1 { features.insert("deferred of a join") }
                    if case .join = kinds[inner] {} else if structureDepth[inner, default: 0] >= 1 {
                        features.insert("deferred of a structure")
                    }
                    structureDepth[id] = level + 1
                case .cancellable(_, let token):
                    features.insert("cancellable")
                    if tokenKinds[token] != nil { features.insert("cancellable by a made token") }
                    structureDepth[id] = level + 1
                case .guardedPromise(let token):
                    features.insert("Promise(cancelledBy:)")
                    if tokenKinds[token] != nil { features.insert("Promise(cancelledBy:) a made token") }
                    structureDepth[id] = level + 1
                default:
                    structureDepth[id] = level
                }
                if case .join(_, let members) = kind, members.contains(where: { deferredDepth[$0] != nil }) {
                    features.insert("join of a deferred")
                }
            case .makeToken(let id, let kind):
                tokenKinds[id] = kind
                switch kind {
                case .linked: features.insert("token.linked")
                case .either: features.insert("token.either")
                case .both: features.insert("token.both")
                case .completion: features.insert("token.completion")
                }
                tokenDepth[id] = 1 + (kind.tokens.map { tokenDepth[$0, default: 0] }.max() ?? 0)
                if tokenDepth[id]! >= 2 { features.insert("token chain 2+ levels") }
                if tokenDepth[id]! >= 3 { features.insert("token chain 3+ levels") }
            case .cancel(let id), .succeed(let id, _), .fail(let id, _), .cancelPromise(let id), .dropPromise(let id):
                if case .cancel = step, structureDepth[id, default: 0] >= 2 { endedOutside.insert(id) }
                guard kinds[id]?.isPromise == true else { break }
                for (structure, promises) in below where structureDepth[structure, default: 0] >= 2 && promises.contains(id) {
                    endedInside.insert(structure)
                }
                if case .cancelPromise = step { features.insert("promise.cancel()") }
            case .cancelSource(let id):
                features.insert("cancelSource")
                if tokenKinds[id] != nil { features.insert("cancelSource of a linked source") }
            default: break
            }
        }
        if !endedOutside.isEmpty { features.insert("structure ended from outside") }
        if !endedInside.isEmpty { features.insert("structure ended from inside") }
        if !endedOutside.isDisjoint(with: endedInside) { features.insert("structure ended from both sides") }
        return features
    }
}
