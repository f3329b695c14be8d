/// The listener behind a token made by `either` (cancelled by the first input) or `both` (by the
/// last): it registers on each input and decides when the composed token is cancelled, or can no
/// longer be.
///
/// It holds the composed token weakly, so that the inputs' registrations do not keep an unused
/// composed token alive; the token detaches the composition when it is freed. Every outcome takes
/// the remaining registrations off the inputs at once, so a long-lived input collects nothing:
///
/// | event                                   | `either` (`.any`)             | `both` (`.all`)                 |
/// |-----------------------------------------|-------------------------------|---------------------------------|
/// | an input is cancelled                   | cancel the token; detach      | count it; the last one cancels  |
/// | an input can no longer be cancelled     | the last live one: immortal   | immortal; detach                |
/// | the token is freed                      | detach                        | detach                          |
final class TokenComposition: TokenListener, @unchecked Sendable {
    // Safety: `registrations`, `ended`, `remaining` and `finished` are only touched under
    // `LockTable.withLock(self)`; registrations taken off the inputs are removed after that lock
    // is released, one input lock at a time. `rule` never changes. `target` is a weak reference,
    // which Swift makes safe to read and write from any thread.
    enum Rule { case any, all }

    let rule: Rule
    /// The composed token; set once, before the composition registers anywhere.
    weak var target: TokenCore?
    /// Each input's registration, while it is stored there.
    private var registrations: [(core: TokenCore, id: Int)?]
    /// Inputs that were cancelled or can no longer be: a registration on them is never stored.
    private var ended: [Bool]
    /// `.any`: inputs that can still be cancelled; `.all`: inputs still to be cancelled.
    private var remaining: Int
    /// The composed token was cancelled, made immortal, or freed: nothing more to decide.
    private var finished = false

    private init(rule: Rule, inputs: Int) {
        self.rule = rule
        registrations = Array(repeating: nil, count: inputs)
        ended = Array(repeating: false, count: inputs)
        remaining = inputs
    }

    /// A composed token over `inputs` (active tokens, checked by the caller).
    static func token(_ rule: Rule, of inputs: [TokenCore]) -> CancellationToken {
        let composition = TokenComposition(rule: rule, inputs: inputs.count)
        let core = TokenCore(phase: .active, composition: composition)
        composition.target = core
        for (index, input) in inputs.enumerated() {
            // An input that fired or died meanwhile has told the composition inline.
            guard let id = input.add(.notify(composition, input: index)) else { continue }
            let stored = LockTable.withLock(composition) { () -> Bool in
                guard !composition.finished, !composition.ended[index] else { return false }
                composition.registrations[index] = (input, id)
                return true
            }
            if !stored { input.remove(id) }
        }
        return CancellationToken(core: core)
    }

    func inputCancelled(_ input: Int) {
        let (decided, target) = inputEnded(input, countsDown: rule == .all)
        if decided { _ = target?.cancel() }
    }

    func inputAbandoned(_ input: Int) {
        let (decided, target) = inputEnded(input, countsDown: rule == .any)
        if decided { target?.makeImmortal() }
    }

    /// Input `input` was cancelled or can no longer be. Decides at once, or, if `countsDown`, when
    /// it was the last input to end; a decision takes every registration off the inputs.
    ///
    /// - Returns: whether this decided, and the composed token to cancel or make immortal.
    private func inputEnded(_ input: Int, countsDown: Bool) -> (decided: Bool, target: TokenCore?) {
        let (decided, target, taken) = LockTable.withLock(self) { () -> (Bool, TokenCore?, [(core: TokenCore, id: Int)?]) in
            guard !finished else { return (false, nil, []) }
            ended[input] = true
            // This input's registration is already gone from it; the reference to the input may be
            // the last one (its source was freed): moved out, released after the lock.
            var own: [(core: TokenCore, id: Int)?] = [nil]
            swap(&own[0], &registrations[input])
            if countsDown {
                remaining -= 1
                guard remaining == 0 else { return (false, nil, own) }
            }
            return (true, finish(), own + takeRegistrations())
        }
        var detached = taken
        remove(&detached)
        return (decided, target)
    }

    /// The composed token was freed: take every registration off the inputs.
    func detach() {
        var detached = LockTable.withLock(self) { () -> [(core: TokenCore, id: Int)?] in
            guard !finished else { return [] }
            finished = true
            return takeRegistrations()
        }
        remove(&detached)
    }

    /// Marks the decision made and returns the composed token, if it still exists (caller holds the
    /// lock; the returned reference is released by the caller, after the unlock).
    private func finish() -> TokenCore? {
        finished = true
        return target
    }

    /// Moves the stored registrations out (caller holds the lock).
    private func takeRegistrations() -> [(core: TokenCore, id: Int)?] {
        var taken = Array<(core: TokenCore, id: Int)?>(repeating: nil, count: registrations.count)
        swap(&taken, &registrations)
        return taken
    }

    /// Takes the registrations off their inputs, then lets go of the inputs: in a loop, since an
    /// input may be a composed token that this frees, and that detaches in turn.
    private func remove(_ detached: inout [(core: TokenCore, id: Int)?]) {
        for case let (core, id)? in detached { core.remove(id) }
        DeferredRelease.release { () -> Any in
            var taken: [(core: TokenCore, id: Int)?] = []
            swap(&taken, &detached)
            return taken
        }
    }
}
