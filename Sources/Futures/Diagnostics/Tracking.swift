#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif
import CFuturesAtomicGlobals

// The atomic globals of tracking are in `CFuturesAtomicGlobals`, with constant initial values (so
// that reading one needs no lazy initialisation):
// - `swift_futures_tracking_switch`: whether futures made now are tracked, one relaxed load per
//   future made. 0 until the first future made reads `SWIFT_FUTURES_DIAGNOSTICS` (or tracking is
//   switched), then 1 (off) or 2 (on).
// - `swift_futures_scope_count`: how many ``FutureDiagnostics/Scope``s exist. While there are none,
//   no scope can be current, and a future tracked then reads no task-local value (the dearest part
//   of tracking it).
// - `swift_futures_next_tracking_id`: the id of the next future tracked.
// All are relaxed: each is a value on its own, publishing no other memory. The switch may be seen
// late by another thread (a future made at the moment tracking is switched may or may not be
// tracked, as with any ordering); a scope is counted before it can be current anywhere, since it
// reaches another thread only through something that orders its making first (a task's creation, a
// lock); ids only need to be distinct, and increase in the order each thread draws them.

/// The bookkeeping behind ``FutureDiagnostics``: a side table, keyed by each tracked future's
/// identity, of what the future itself does not store (id, kind, call site, birth, name, scope, a
/// join's members). A future in the table has its `tracked` flag set, and its deinit removes it.
///
/// The table is striped like the futures' locks, by the same hash, and guarded by the same locks:
/// the record of a future whose stripe lock is `LockTable.lock(at: i)` is in `tables[i]`, under
/// that lock. So tracking a future (its record and its flag) and its deinit's removal each take the
/// one lock the engine takes for that future anyway: no global lock, no weak reference, and no
/// contention between futures of different stripes.
///
/// A record does not retain its future. A snapshot (``pending(in:)``, and so the dumps and the
/// watchdog) must not either: a future whose last reference is gone may be waiting in its deinit
/// for the stripe lock the snapshot holds, to remove its record; a reference taken then would
/// outlive it. Its memory and fields stay valid until that deinit gets the lock, so the snapshot
/// reads them under the lock (``TrackedNode/lockedSnapshot(of:)``, which sees the futures of the
/// stripe it holds) and copies out what it needs; the only references it takes are to what such a
/// future still holds strongly (its upstream, its link), which live at least until its deinit has
/// gone on, after the unlock, and they are released after the last unlock.
///
/// Lock order: the table adds no lock of its own. Its critical regions follow the stripe rules: one
/// stripe at a time, no user code, nothing released (a replaced or removed record is returned and
/// dropped after the unlock). A future's deinit takes its stripe lock here, as the engine's locked
/// regions never free a future (they return what they remove). The lock of ``state`` (the reporter,
/// the listening scopes) is never held with a stripe lock.
@usableFromInline
enum Tracking {
    /// Whether `SWIFT_FUTURES_DIAGNOSTICS` in this process's environment turns tracking on.
    static var enabledByEnvironment: Bool {
        enables(diagnosticsVariable: getenv("SWIFT_FUTURES_DIAGNOSTICS").map { String(cString: $0) })
    }

    /// Whether a value of `SWIFT_FUTURES_DIAGNOSTICS` (`nil` if unset) turns tracking on: only `1`.
    static func enables(diagnosticsVariable value: String?) -> Bool {
        value == "1"
    }

    /// Whether futures made now are tracked.
    @inlinable static var isOn: Bool {
        let state = swift_futures_tracking_switch_load_relaxed()
        if _fastPath(state == 1) { return false }
        return state == 2 || decideFromEnvironment()
    }

    /// The first future made: the environment decides, unless tracking was switched meanwhile.
    @usableFromInline @inline(never)
    static func decideFromEnvironment() -> Bool {
        _ = swift_futures_tracking_switch_compare_exchange_relaxed(0, enabledByEnvironment ? 2 : 1)
        return swift_futures_tracking_switch_load_relaxed() == 2
    }

    static func turn(on: Bool) {
        swift_futures_tracking_switch_store_relaxed(on ? 2 : 1)
    }

    /// What the table knows of one future.
    struct Record {
        let id: UInt64
        /// The future's identity, the record's key.
        let key: ObjectIdentifier
        /// The future's type, which reads its state.
        let type: any TrackedNode.Type
        let kind: StaticString
        let file: StaticString
        let line: UInt
        /// When the future was made, on ``Tracking/now()``.
        let made: UInt64
        var name: String?
        /// The ids of a join's members: what it waits on (a join records none in the future itself).
        var members: [UInt64]
        let scope: FutureDiagnostics.Scope?
        var reportedStalled = false

        /// The future, not retained (see ``Tracking``).
        var object: Unmanaged<AnyObject> {
            Unmanaged.fromOpaque(UnsafeRawPointer(bitPattern: UInt(bitPattern: key))!)
        }

        func description() -> FutureDescription {
            FutureDescription(id: id, name: name, kind: String(describing: kind), file: String(describing: file), line: Int(line))
        }
    }

    /// Nanoseconds on a monotonic clock that stops while the system sleeps: the clock of the
    /// futures' ages. A coarse one where there is one (its ticks are a few milliseconds apart, far
    /// finer than any age worth reporting), since every future tracked reads it.
    static func now() -> UInt64 {
        #if canImport(Darwin)
        return clock_gettime_nsec_np(CLOCK_UPTIME_RAW)
        #else
        var time = timespec()
        #if os(Linux) || os(Android)
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        #else
        clock_gettime(CLOCK_MONOTONIC, &time)
        #endif
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
        #endif
    }

    struct State {
        var reporter: (@Sendable (FutureEvent) -> Void)?
        /// Scopes that want events: while there are any, rare events look for a listener.
        var listeningScopes = 0
    }

    /// The reporter and the listening scopes. Its lock is taken under no stripe lock, and takes none.
    static let state = Locked(State())

    /// The records, one table for each stripe of ``LockTable``: a future's record is in the table
    /// of its own stripe, guarded by that stripe's lock. One cache line apart, like the locks, so
    /// that two threads tracking futures of different stripes do not share a line.
    // Safety: allocated and initialised once, in this lazy initialiser (which Swift runs exactly
    // once, thread-safely), never freed or moved; the table of stripe `i` is only touched while
    // holding `LockTable.lock(at: i)` (see ``withStripe(_:_:)``).
    nonisolated(unsafe) static let tables: UnsafeMutableRawPointer = {
        precondition(MemoryLayout<RecordTable>.size <= LockTable.stride)
        let memory = UnsafeMutableRawPointer.allocate(byteCount: LockTable.count * LockTable.stride, alignment: LockTable.stride)
        for index in 0..<LockTable.count {
            (memory + index * LockTable.stride).bindMemory(to: RecordTable.self, capacity: 1).initialize(to: RecordTable())
        }
        return memory
    }()

    /// Runs `body` on the records of stripe `index`, holding that stripe's lock: the rules of
    /// `LockTable.withLock(_:_:)` apply (no other lock, no user code, nothing released).
    static func withStripe<R>(_ index: Int, _ body: (inout RecordTable) -> R) -> R {
        let lock = LockTable.lock(at: index)
        #if DEBUG
        LockChecks.willLockStripes(index, index)
        #endif
        RawLockOps.lock(lock)
        defer {
            RawLockOps.unlock(lock)
            #if DEBUG
            LockChecks.didUnlockStripe()
            #endif
        }
        return body(&(tables + index * LockTable.stride).assumingMemoryBound(to: RecordTable.self).pointee)
    }

    /// Whether anyone listens for events: a reporter, or a scope with a handler.
    @usableFromInline static var reporting: Bool {
        state.withLock { $0.reporter != nil || $0.listeningScopes > 0 }
    }

    /// A number for a future tracked now: later futures have higher numbers.
    static func newID() -> UInt64 {
        swift_futures_next_tracking_id_draw_relaxed()
    }

    /// The scope current now. While no scope exists there is none, and no task-local value to read.
    static var currentScope: FutureDiagnostics.Scope? {
        if swift_futures_scope_count_load_relaxed() == 0 { return nil }
        return FutureDiagnostics.Scope.current
    }

    /// Adds `node` to the table and sets its `tracked` flag (or names it, if it is there already).
    ///
    /// With `overriding`, a future already tracked takes this kind and call site (a public
    /// operator's, over that of the promise it made inside).
    static func track<Value>(
        _ node: FutureStorage<Value>, kind: StaticString, file: StaticString, line: UInt, members: [AnyObject], name: String?,
        overriding: Bool
    ) {
        let key = ObjectIdentifier(node)
        let memberIDs = members.isEmpty ? [] : members.compactMap { id(of: $0) }
        let scope = currentScope
        let made = now()
        // The type read from the object itself: naming `FutureStorage<Value>` here, unspecialised,
        // would look its metadata up.
        let type: any TrackedNode.Type = Swift.type(of: node)
        let replaced = withStripe(LockTable.index(of: node)) { records -> (String?, [UInt64])? in
            // A future not tracked yet has no record to look for: the usual case.
            guard node.flag(StorageFlags.tracked) else {
                node.flags |= StorageFlags.tracked
                records.insert(
                    Record(
                        id: newID(), key: key, type: type, kind: kind, file: file, line: line, made: made, name: name,
                        members: memberIDs, scope: scope))
                return nil
            }
            let found = records.update(key) { record -> (String?, [UInt64]) in
                let old = (record.name, record.members)  // released after the unlock
                if let name { record.name = name }
                if overriding {
                    record = Record(
                        id: record.id, key: key, type: record.type, kind: kind, file: file, line: line, made: record.made,
                        name: record.name, members: memberIDs.isEmpty ? record.members : memberIDs, scope: record.scope,
                        reportedStalled: record.reportedStalled)
                }
                return old
            }
            if found == nil {
                records.insert(
                    Record(
                        id: newID(), key: key, type: type, kind: kind, file: file, line: line, made: made, name: name,
                        members: memberIDs, scope: scope))
            }
            return found
        }
        releaseOutsideLock(replaced)
    }

    static func record(of object: AnyObject) -> Record? {
        let key = ObjectIdentifier(object)
        return withStripe(LockTable.index(of: object)) { $0[key] }
    }

    static func id(of object: AnyObject) -> UInt64? {
        let key = ObjectIdentifier(object)
        return withStripe(LockTable.index(of: object)) { $0[key]?.id }
    }

    /// A tracked future's deinit: its record goes; a failure nobody observed is reported.
    static func freed(_ key: ObjectIdentifier, stripe: Int, unobservedFailure error: (any Error)?) {
        let record = withStripe(stripe) { $0.remove(key) }
        guard let error, let record else { return }
        let reporter = state.withLock { $0.reporter }
        guard reporter != nil || record.scope?.onEvent != nil else { return }
        deliver(.unobservedFailure(record.description(), error: error), scope: record.scope, reporter: reporter)
    }

    static func deliver(_ event: FutureEvent, scope: FutureDiagnostics.Scope?, reporter: (@Sendable (FutureEvent) -> Void)?) {
        reporter?(event)
        scope?.onEvent?(event)
    }

    /// Reports an event about `node`, described by its record or by `fallback`.
    static func report(_ node: AnyObject, fallback: @autoclosure () -> FutureDescription, _ event: (FutureDescription) -> FutureEvent) {
        let record = record(of: node)
        let reporter = state.withLock { $0.reporter }
        deliver(event(record?.description() ?? fallback()), scope: record?.scope, reporter: reporter)
    }

    static func report<Value>(brokenPromise storage: FutureStorage<Value>, error: FutureError, file: StaticString, line: UInt) {
        report(storage, fallback: FutureDescription(id: nil, name: nil, kind: "promise", file: String(describing: file), line: Int(line))) {
            .brokenPromise($0, error: error)
        }
    }

    static func report<Value>(droppedJobOf storage: FutureStorage<Value>) {
        report(storage, fallback: FutureDescription(id: nil, name: nil, kind: "future", file: "", line: 0)) { .droppedJob($0) }
    }

    static func reportCycle<Value>(closedBy adopter: FutureStorage<Value>, members: [any CycleNode]) {
        let descriptions = members.compactMap { record(of: $0)?.description() }
        report(adopter, fallback: FutureDescription(id: nil, name: nil, kind: "future", file: "", line: 0)) {
            .cycle($0, members: descriptions)
        }
    }

    /// The tracked futures still pending (of `scope`, if given), oldest first.
    static func pending(in scope: FutureDiagnostics.Scope? = nil) -> [PendingFuture] {
        // Read stripe by stripe, under each stripe's lock, without retaining the futures (see
        // ``Tracking``); what the copies retain is released after the last unlock.
        var found: [(Record, LockedSnapshot)] = []
        for stripe in 0..<LockTable.count {
            withStripe(stripe) { records in
                records.forEachRecord { record in
                    guard scope == nil || record.scope === scope else { return }
                    found.append((record, record.type.lockedSnapshot(of: record.object)))
                }
            }
        }
        let reading = now()
        // A future merged into another (a `flatMap`'s result absorbing the future it adopted)
        // shares its state: the state of the future holding it, found from its link and its depth
        // below it as the engine finds it (through the forward of a split), says whether it is
        // pending.
        let snapshots = found.map { record, locked -> (Record, NodeSnapshot) in
            if let link = locked.link { return (record, link.diagnosticSnapshot(startingAt: locked.linkDepth)) }
            let upstream = locked.upstream?.resolved.map { ObjectIdentifier($0) }
            return (
                record,
                NodeSnapshot(
                    pending: locked.pending, root: record.key, depth: 0, upstream: upstream, consumers: locked.consumers,
                    observers: locked.observers)
            )
        }
        // Every record's id by the future's identity, for the edges.
        var ids: [ObjectIdentifier: UInt64] = [:]
        for (record, _) in snapshots { ids[record.key] = record.id }
        // A merged future that a late consumer split off has its state in a future the split made,
        // at depth 0, untracked: that future stands for it (its consumers wait on it).
        for (record, snapshot) in snapshots where snapshot.depth == 0 && snapshot.root != record.key && ids[snapshot.root] == nil {
            ids[snapshot.root] = record.id
        }
        /// Whether `record`'s future holds its state, itself or through the future a split made.
        func holdsItsState(_ record: Record, _ snapshot: NodeSnapshot) -> Bool {
            snapshot.root == record.key || (snapshot.depth == 0 && ids[snapshot.root] == record.id)
        }
        // The one holding a merged future's state waits on the merged futures, which wait on its
        // upstream.
        var merged: [ObjectIdentifier: [UInt64]] = [:]
        var pendingIDs: Set<UInt64> = []
        for (record, snapshot) in snapshots where snapshot.pending {
            pendingIDs.insert(record.id)
            if !holdsItsState(record, snapshot) { merged[snapshot.root, default: []].append(record.id) }
        }
        var result: [PendingFuture] = []
        for (record, snapshot) in snapshots where snapshot.pending {
            let age = Duration.nanoseconds(Int64(truncatingIfNeeded: reading &- min(reading, record.made)))
            var waits: [UInt64] = []
            if holdsItsState(record, snapshot), let inner = merged[snapshot.root] {
                waits = inner.sorted()
            } else if let upstream = snapshot.upstream, let id = ids[upstream], pendingIDs.contains(id) {
                // (A source that has completed, whose job for this one has not run yet, is not
                // listed: nor is the edge to it.)
                waits = [id]
            }
            waits += record.members.filter { pendingIDs.contains($0) }
            result.append(PendingFuture(
                id: record.id, name: record.name, kind: String(describing: record.kind),
                file: String(describing: record.file), line: Int(record.line), age: age,
                waitingOn: waits, consumers: snapshot.consumers, observers: snapshot.observers))
        }
        return result.sorted { $0.id < $1.id }
    }

    /// Marks the given futures as reported stalled; returns those not reported before.
    static func markStalled(_ futures: [PendingFuture]) -> [(PendingFuture, FutureDiagnostics.Scope?)] {
        let wanted = Set(futures.map(\.id))
        var fresh: Set<UInt64> = []
        var scopes: [UInt64: FutureDiagnostics.Scope] = [:]
        for stripe in 0..<LockTable.count {
            withStripe(stripe) { records in
                records.updateEach { record in
                    guard wanted.contains(record.id), !record.reportedStalled else { return }
                    record.reportedStalled = true
                    fresh.insert(record.id)
                    if let scope = record.scope { scopes[record.id] = scope }
                }
            }
        }
        return futures.filter { fresh.contains($0.id) }.map { ($0, scopes[$0.id]) }
    }
}

/// What diagnostics need of a future, whatever its value type.
protocol TrackedNode: AnyObject, Sendable {
    /// The state of the future `depth` below this one, or of the one holding it if it was merged
    /// into another (found as the engine finds it, through links and the forwards of splits).
    func diagnosticSnapshot(startingAt depth: Int32) -> NodeSnapshot

    /// What a snapshot needs of `object`, a future of this type, read while the caller holds its
    /// stripe lock, without retaining it (it may be waiting in its deinit for that lock).
    static func lockedSnapshot(of object: Unmanaged<AnyObject>) -> LockedSnapshot
}

/// A future's state as diagnostics see it.
struct NodeSnapshot {
    var pending: Bool
    /// The identity of the future holding its state (itself unless merged into another).
    var root: ObjectIdentifier
    /// Its depth below `root`: 0 for the future holding it.
    var depth: Int32
    /// What it waits on: its source, or the future it adopted.
    var upstream: ObjectIdentifier?
    var consumers: Int
    var observers: Int
}

/// A tracked future's state, read under its stripe lock by a snapshot of the table.
struct LockedSnapshot {
    var pending: Bool
    var consumers: Int
    var observers: Int
    /// What it waits on (its source, or the future it adopted). The future holds it strongly until
    /// its deinit goes on, which cannot happen before the snapshot's unlock: retaining it is safe.
    var upstream: ConsumerSource?
    /// The future it was merged into, if it was (retained, as safely as `upstream`).
    var link: (any TrackedNode)?
    /// Its depth below `link`.
    var linkDepth: Int32 = 0
}

extension FutureStorage: TrackedNode {
    func diagnosticSnapshot(startingAt depth: Int32) -> NodeSnapshot {
        let (node, depth) = lockedRoot(startingAt: depth)
        let upstream = node.upstream?.resolved  // released after the lock
        let consumers = node.phase == .pending ? Int(node.consumers) : 0
        let callbacks = node.phase == .pending ? node.callbacks.count + (node.extras?.merge.observerCount ?? 0) : 0
        let snapshot = NodeSnapshot(
            pending: node.phase == .pending, root: ObjectIdentifier(node), depth: depth, upstream: nil,
            consumers: consumers, observers: max(0, callbacks - consumers))
        LockTable.release(LockTable.lock(at: LockTable.index(of: node)))
        var result = snapshot
        result.upstream = upstream.map(ObjectIdentifier.init)
        releaseOutsideLock(upstream)
        return result
    }

    static func lockedSnapshot(of object: Unmanaged<AnyObject>) -> LockedSnapshot {
        // Borrowed in place, typed from the start: binding the future to a constant (a downcast's
        // result, say) is a copy, which a debug build makes as a retain and a release; if another
        // thread let go of its last reference meanwhile, that release would free it here, under
        // the stripe lock its deinit takes. For the same reason only stored fields are read, and
        // getters that only read them: `link`'s getter asserts, and in a debug build the assertion's
        // message captures the future.
        Unmanaged<FutureStorage<Value>>.fromOpaque(object.toOpaque())._withUnsafeGuaranteedRef { node in
            if node.phase == .linked {
                // The link, which a linked future keeps where a pending one keeps its upstream.
                let link = node.upstream.map { unsafeDowncast($0 as AnyObject, to: FutureStorage<Value>.self) }
                return LockedSnapshot(
                    pending: false, consumers: 0, observers: 0, upstream: nil, link: link, linkDepth: node.state.linkDepth)
            }
            let pending = node.phase == .pending
            let consumers = pending ? Int(node.consumers) : 0
            let callbacks = pending ? node.callbacks.count + (node.extras?.merge.observerCount ?? 0) : 0
            return LockedSnapshot(
                pending: pending, consumers: consumers, observers: max(0, callbacks - consumers), upstream: node.upstream, link: nil)
        }
    }

    /// Starts tracking this future (made by `kind` at `file:line`), if it is not tracked yet.
    @usableFromInline @inline(never)
    final func track(kind: StaticString, file: StaticString, line: UInt, members: [AnyObject] = [], name: String? = nil, overriding: Bool = false) {
        Tracking.track(self, kind: kind, file: file, line: line, members: members, name: name, overriding: overriding)
    }

    /// ``track(kind:file:line:members:name:overriding:)`` without a name or members, the case of
    /// every future made while tracking is on: inlined callers pass nothing they need not build.
    @usableFromInline @inline(never)
    final func track(kind: StaticString, file: StaticString, line: UInt, overriding: Bool) {
        Tracking.track(self, kind: kind, file: file, line: line, members: [], name: nil, overriding: overriding)
    }

    /// Whether diagnostics track this future.
    final var isTracked: Bool { LockTable.withLock(self) { flag(StorageFlags.tracked) } }

    /// The outcome, as a reader that observes it: a failure read is not reported as unobserved.
    /// Reading a pending future observes nothing (a later failure may still go unread).
    @inlinable
    final var observedOutcome: Outcome<Value>? {
        withState { node in
            guard let result = node.result else { return nil }
            node.flags |= StorageFlags.observed
            return result
        }
    }

    /// The future that holds this one's outcome, if it has completed, found as
    /// ``observedOutcome`` reads it. Its `storedOutcome` is final then, and is read after the lock
    /// that saw it complete; unspecialised code that mostly meets pending futures (adoption) finds
    /// them pending this way without copying an optional outcome, which costs type-metadata
    /// lookups.
    final var observedCompletedHolder: FutureStorage<Value>? {
        // Found as `AnyObject?`: a result type that depends on `Value` would cost those callers a
        // type-metadata lookup too.
        let holder: AnyObject? = withState { node in
            guard node.phase == .completed else { return nil }
            node.flags |= StorageFlags.observed
            return node
        }
        guard let holder else { return nil }
        return unsafeDowncast(holder, to: FutureStorage<Value>.self)
    }

    /// Called by the deinit of a tracked future.
    @inline(never)
    final func trackedFutureFreed() {
        var unobserved: (any Error)?
        if phase == .completed, !flag(StorageFlags.observed), case .failure(let error) = storedOutcome {
            switch error as? FutureError {
            case .brokenPromise?, .cycle?, .droppedJob?: break  // reported when they happened
            default: unobserved = error
            }
        }
        Tracking.freed(ObjectIdentifier(self), stripe: LockTable.index(of: self), unobservedFailure: unobserved)
    }
}

extension Future {
    /// Records this new future for diagnostics, if tracking is on; returns it.
    @inlinable
    func made(_ kind: StaticString, _ file: StaticString, _ line: UInt) -> Future {
        if Tracking.isOn { storage.track(kind: kind, file: file, line: line, overriding: true) }
        return self
    }

    /// ``made(_:_:_:)`` for a join, which waits on `members`.
    @inlinable
    func made<Member>(_ kind: StaticString, _ file: StaticString, _ line: UInt, members: [Future<Member>]) -> Future {
        if Tracking.isOn { storage.track(kind: kind, file: file, line: line, members: members.map(\.storage), overriding: true) }
        return self
    }
}
