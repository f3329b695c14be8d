/// A callback stored on a future, run once with its outcome by a drain loop.
@usableFromInline
typealias Callback<Value> = @Sendable (Outcome<Value>) -> Void

/// Names one registration on a future, so that whoever made it can take it off again: a consumer
/// that withdrew, or an `observe()` branch that was cancelled, removes its entry at once, closure and
/// captures included, so a long-lived pending future does not collect the consumers that left it.
///
/// `owner` is the registrant's identity (the derived future, the awaiting task's waiter, the
/// adopting future, the join); `index` tells a join's members apart (one future may be listed twice).
/// The identity cannot be reused while the entry exists, because the entry holds its owner.
@usableFromInline
struct RegistrationKey: Hashable, Sendable {
    @usableFromInline let owner: ObjectIdentifier
    @usableFromInline let index: Int

    @inlinable init(owner: ObjectIdentifier, index: Int) {
        self.owner = owner
        self.index = index
    }

    /// The key of a registration made by `owner` (not a join's member).
    @inlinable init(_ owner: AnyObject) { self.init(owner: ObjectIdentifier(owner), index: -1) }
}

/// One registered callback: a callback on the outcome, with its owner's identity if it may be
/// removed; or, stored as is without a wrapping closure (and so without an allocation), a success
/// or failure handler that runs inline, or a join's member sink with the member's index; or, first
/// in a completed future's list only, the observers its merge set carried (see
/// ``MergedObservers/run(with:)``), run from the set's own buffer rather than copied into the list.
@usableFromInline
enum CallbackEntry<Value: Sendable> {
    case outcome(Callback<Value>, owner: ObjectIdentifier?)
    case success(@Sendable (Value) -> Void)
    case failure(@Sendable (any Error) -> Void)
    case member(MemberSink<Value>, index: Int)
    case carried(PendingExtras<Value>)

    @inlinable
    func run(with outcome: Outcome<Value>) {
        switch self {
        case .outcome(let callback, _): callback(outcome)
        case .success(let body): if case .success(let value) = outcome { body(value) }
        case .failure(let body): if case .failure(let error) = outcome { body(error) }
        case .member(let sink, let index): sink.receive(outcome, index)
        case .carried(let extras): extras.merge.observers?.run(with: outcome)
        }
    }

    /// This entry, made to run with the context current now, or its absence (see
    /// ``FutureContext``): itself unless a carrier is installed (one relaxed atomic load). A join's
    /// member entry is left as it is: its sink runs no user code.
    @inlinable @inline(__always)
    func carryingContext() -> CallbackEntry {
        if _fastPath(!FutureContext.isInstalled) { return self }
        return carryingCapturedContext()
    }

    @inlinable @inline(never)
    func carryingCapturedContext() -> CallbackEntry {
        guard let context = FutureContext.captureInstalled() else { return self }
        switch self {
        case .outcome(let callback, let owner): return .outcome({ outcome in context.restore { callback(outcome) } }, owner: owner)
        case .success(let body): return .success({ value in context.restore { body(value) } })
        case .failure(let body): return .failure({ error in context.restore { body(error) } })
        case .member, .carried: return self
        }
    }

    /// The key under which the entry can be removed (`nil`: it cannot be).
    @inlinable
    var key: RegistrationKey? {
        switch self {
        case .outcome(_, let owner): owner.map { RegistrationKey(owner: $0, index: -1) }
        case .success, .failure, .carried: nil
        case .member(let sink, let index): RegistrationKey(owner: sink.owner, index: index)
        }
    }
}

/// Where a join's members report: one per join, so that a member's callback is this sink and the
/// member's index, stored inline in the member's callback list, rather than a closure allocated
/// per member (a third of the allocations of `Future.all`).
@usableFromInline
final class MemberSink<Value: Sendable>: Sendable {
    @usableFromInline let receive: @Sendable (Outcome<Value>, Int) -> Void
    /// The join's identity: with a member's index, the key of that member's registration.
    @usableFromInline let owner: ObjectIdentifier

    /// A sink for the join `owner`. `receive` carries no context (see ``FutureContext``): it runs
    /// the join's own code, never user code, and completes the join, whose callbacks each carry
    /// their registration's context.
    @inlinable init(owner: AnyObject, _ receive: @escaping @Sendable (Outcome<Value>, Int) -> Void) {
        self.owner = ObjectIdentifier(owner)
        self.receive = receive
    }
}

/// Where the entries of a long callback list sit, so that removing one costs constant time
/// (amortised): built on the first removal from a list longer than ``CallbackList/linearLimit``,
/// indexing entries appended since as it goes; removed entries leave holes, closed (and the index
/// dropped) once they are half the list.
@usableFromInline
struct RegistrationIndex {
    @usableFromInline var positions: [RegistrationKey: Int] = [:]
    /// How many of the list's `rest` entries are in `positions` (or have no key).
    @usableFromInline var indexed = 0
    /// How many holes `rest` has.
    @usableFromInline var holes = 0
    /// How many of `rest`'s first entries are known to be holes.
    @usableFromInline var leadingHoles = 0

    @usableFromInline init() {}
}

/// Callbacks in registration order; the first is stored inline, so a future with one callback
/// allocates no list (SwiftNIO's `CallbackList` idea), and a first inline success handler needs no
/// wrapping closure either.
///
/// Invariants: `first == nil` means the list is empty (`rest` is then `nil`); `rest` is `nil` or
/// not empty, and has holes (`nil` entries) only while an index (``RegistrationIndex``) covers it.
@usableFromInline
struct CallbackList<Value: Sendable> {
    @usableFromInline var first: CallbackEntry<Value>?
    /// The entries after the first; `nil` rather than empty, because an empty array of a generic
    /// element type costs unspecialised code (drain, adoption) two type-metadata lookups to make.
    @usableFromInline var rest: [CallbackEntry<Value>?]?

    /// Lists up to this long are searched from the end when an entry is removed.
    @inlinable static var linearLimit: Int { 16 }

    @inlinable init() {}

    /// (Always inlined: a call would take the list's type metadata, which unspecialised callers
    /// look up.)
    @inlinable @inline(__always) var isEmpty: Bool { first == nil }

    /// How many entries the list holds (holes not counted).
    var count: Int { first == nil ? 0 : 1 + (rest?.count { $0 != nil } ?? 0) }

    @inlinable @inline(__always)
    mutating func append(_ entry: consuming CallbackEntry<Value>) {
        if first == nil { first = entry } else { appendAfterFirst(entry) }
    }

    /// Out of line: registration, which inlines `append`, stays small for the usual single callback.
    @inlinable @inline(never)
    mutating func appendAfterFirst(_ entry: consuming CallbackEntry<Value>) {
        if rest == nil { rest = [entry] } else { rest!.append(entry) }
    }

    /// Whether every entry is one that nobody can take off (an observer's, not a consumer's or a
    /// join member's).
    var holdsOnlyObservers: Bool {
        guard let first else { return true }
        guard first.key == nil else { return false }
        guard let rest else { return true }
        for entry in rest where entry?.key != nil { return false }
        return true
    }

    /// Whether a future registered here may wait on this list's future: any entry with a key (a
    /// derived future, an adopter, a join, an awaiting task), or more entries than are worth
    /// looking through at every adoption. Observers (entries without a key) wait on nothing.
    /// (The empty list, the usual case, is decided inline: unspecialised, that needs no metadata
    /// of the entry type.)
    @inlinable @inline(__always)
    var mayHoldWaiter: Bool { isEmpty ? false : entriesMayHoldWaiter }

    @usableFromInline
    var entriesMayHoldWaiter: Bool { (rest?.count ?? 0) > 8 || !holdsOnlyObservers }

    /// Makes room for `count` entries in all, so that appending them grows the list once. (An
    /// empty list then has an empty `rest`, not `nil`, until its first entry is appended.)
    mutating func reserveCapacity(_ count: Int) {
        guard count > 1 else { return }
        if rest == nil { rest = [] }
        rest!.reserveCapacity(count - 1)
    }

    /// Appends the entries of `other` (not its holes).
    @inlinable
    mutating func append(contentsOf other: CallbackList<Value>) {
        guard let otherFirst = other.first else { return }
        append(otherFirst)
        guard let otherRest = other.rest else { return }
        for entry in otherRest where entry != nil { append(entry!) }
    }

    /// Runs the entries in order and leaves the list empty; the entries are released when this
    /// returns. The first entry is moved out, not copied, so running it takes no retain.
    @inlinable
    mutating func runAndEmpty(with outcome: Outcome<Value>) {
        guard let first = first.take() else { return }
        first.run(with: outcome)
        guard let rest = rest.take() else { return }
        // A plain loop, as in `remove`: an iterator's generic metadata would be looked up on every
        // call of this unspecialised code (under ThreadSanitizer, taking a lock of the runtime).
        var index = 0
        while index < rest.count {
            rest[index]?.run(with: outcome)
            index += 1
        }
    }

    /// Takes off the entry registered under `key`, if it is here, and returns it (for the caller to
    /// release after its lock). The others keep their order.
    @usableFromInline
    mutating func remove(_ key: RegistrationKey, index: inout RegistrationIndex?) -> CallbackEntry<Value>? {
        if let first, first.key == key {
            var removed: CallbackEntry<Value>? = nil
            swap(&removed, &self.first)
            promoteFirst(index: &index)
            return removed
        }
        guard var entries = rest.take() else { return nil }  // moved out: no copy on write
        defer { rest = entries.isEmpty ? nil : entries }
        if index == nil, entries.count <= Self.linearLimit {
            // A plain loop: this runs unspecialised (withdrawal goes through an existential), where
            // the generic collection algorithms would look up witness tables and metadata.
            var position = entries.count - 1
            while position >= 0 {
                if entries[position]?.key == key { return entries.remove(at: position) }
                position -= 1
            }
            return nil
        }
        var built = index.take() ?? RegistrationIndex()  // moved out: a copy would copy the dictionary
        while built.indexed < entries.count {
            if let entryKey = entries[built.indexed]?.key { built.positions[entryKey] = built.indexed }
            built.indexed += 1
        }
        guard let position = built.positions.removeValue(forKey: key) else {
            index = built
            return nil
        }
        var removed: CallbackEntry<Value>? = nil
        swap(&removed, &entries[position])
        built.holes += 1
        Self.close(&entries, &built, into: &index)
        return removed
    }

    /// After the first entry was removed: the next entry becomes first.
    @usableFromInline
    mutating func promoteFirst(index: inout RegistrationIndex?) {
        guard var entries = rest.take() else { return }  // `first` stays `nil`: the list is empty
        defer { rest = entries.isEmpty ? nil : entries }
        if index == nil, entries.count <= Self.linearLimit {
            first = entries.removeFirst()
            return
        }
        var built = index.take() ?? RegistrationIndex()
        while built.leadingHoles < entries.count, entries[built.leadingHoles] == nil { built.leadingHoles += 1 }
        guard built.leadingHoles < entries.count else {
            entries = []  // only holes were left; the index stays dropped
            return
        }
        swap(&first, &entries[built.leadingHoles])
        if let key = first?.key { built.positions[key] = nil }
        built.holes += 1
        built.leadingHoles += 1
        Self.close(&entries, &built, into: &index)
    }

    /// Keeps the index, or, once holes are half the list, closes them and drops it (the positions
    /// change).
    @usableFromInline
    static func close(_ entries: inout [CallbackEntry<Value>?], _ built: inout RegistrationIndex, into index: inout RegistrationIndex?) {
        if built.holes * 2 > entries.count {
            // Close the holes, in a fresh array sized for what is left (the peak is not kept).
            var kept: [CallbackEntry<Value>?] = []
            kept.reserveCapacity(entries.count - built.holes)
            for entry in entries where entry != nil { kept.append(entry) }
            entries = kept
        } else {
            index = built
        }
    }
}
