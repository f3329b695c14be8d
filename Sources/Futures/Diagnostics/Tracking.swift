#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif
#if !canImport(Darwin)
import Synchronization
#endif

#if !canImport(Darwin)
/// Whether futures made now are tracked: one relaxed load per future made. 0 until the first
/// future made reads `SWIFT_FUTURES_DIAGNOSTICS` (or tracking is switched), then 1 (off) or 2 (on).
/// A constant initial value, so that reading it needs no lazy initialisation of the global.
@usableFromInline let trackingSwitch = Atomic<UInt8>(0)
#else
// Apple platforms before macOS 15 and iOS 18 lack `Synchronization.Atomic`: the switch is read
// under a lock there.
@usableFromInline let trackingSwitch = Locked<Bool>(Tracking.enabledByEnvironment)
#endif

/// The bookkeeping behind ``FutureDiagnostics``: a side table, keyed by each tracked future's
/// identity, of what the future itself does not store (kind, call site, birth, name, scope). A
/// future in the table has its `tracked` flag set, and its deinit removes it.
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
        #if !canImport(Darwin)
        let state = trackingSwitch.load(ordering: .relaxed)
        if _fastPath(state == 1) { return false }
        return state == 2 || decideFromEnvironment()
        #else
        trackingSwitch.withLock { $0 }
        #endif
    }

    #if !canImport(Darwin)
    /// The first future made: the environment decides, unless tracking was switched meanwhile.
    @usableFromInline @inline(never)
    static func decideFromEnvironment() -> Bool {
        _ = trackingSwitch.compareExchange(expected: 0, desired: enabledByEnvironment ? 2 : 1, ordering: .relaxed)
        return trackingSwitch.load(ordering: .relaxed) == 2
    }
    #endif

    static func turn(on: Bool) {
        #if !canImport(Darwin)
        trackingSwitch.store(on ? 2 : 1, ordering: .relaxed)
        #else
        trackingSwitch.withLock { $0 = on }
        #endif
    }

    /// What the table knows of one future.
    struct Record {
        let id: UInt64
        weak var node: (any TrackedNode)?
        let kind: StaticString
        let file: StaticString
        let line: UInt
        let made: ContinuousClock.Instant
        var name: String?
        /// A join's members: what it waits on (a join records none in the future itself).
        var members: [WeakNode]
        let scope: FutureDiagnostics.Scope?
        var reportedStalled = false

        func description() -> FutureDescription {
            FutureDescription(id: id, name: name, kind: String(describing: kind), file: String(describing: file), line: Int(line))
        }
    }

    struct WeakNode {
        weak var node: (any TrackedNode)?
    }

    struct State {
        var records: [ObjectIdentifier: Record] = [:]
        var nextID: UInt64 = 1
        var reporter: (@Sendable (FutureEvent) -> Void)?
        /// Scopes that want events: while there are any, rare events look for a listener.
        var listeningScopes = 0
    }

    static let state = Locked(State())

    /// Whether anyone listens for events: a reporter, or a scope with a handler.
    @usableFromInline static var reporting: Bool {
        state.withLock { $0.reporter != nil || $0.listeningScopes > 0 }
    }

    /// Adds `node` to the table (or names it, if it is there already).
    ///
    /// With `overriding`, a future already tracked takes this kind and call site (a public
    /// operator's, over that of the promise it made inside).
    static func track(_ node: any TrackedNode, kind: StaticString, file: StaticString, line: UInt, members: [any TrackedNode], name: String? = nil, overriding: Bool = false) {
        let key = ObjectIdentifier(node)
        let scope = FutureDiagnostics.Scope.current
        let made = ContinuousClock.now
        state.withLock { state in
            if let old = state.records[key] {
                var record = old
                if let name { record.name = name }
                if overriding {
                    record = Record(
                        id: old.id, node: node, kind: kind, file: file, line: line, made: old.made, name: record.name,
                        members: members.isEmpty ? old.members : members.map { WeakNode(node: $0) }, scope: old.scope)
                }
                state.records[key] = record
                return
            }
            let id = state.nextID
            state.nextID += 1
            state.records[key] = Record(
                id: id, node: node, kind: kind, file: file, line: line, made: made, name: name,
                members: members.map { WeakNode(node: $0) }, scope: scope)
        }
    }

    static func record(of node: AnyObject) -> Record? {
        let key = ObjectIdentifier(node)
        return state.withLock { $0.records[key] }
    }

    /// A tracked future's deinit: its record goes; a failure nobody observed is reported.
    static func freed(_ key: ObjectIdentifier, unobservedFailure error: (any Error)?) {
        let (record, reporter) = state.withLock { state in
            (state.records.removeValue(forKey: key), state.reporter)
        }
        guard let error, let record, reporter != nil || record.scope?.onEvent != nil else { return }
        deliver(.unobservedFailure(record.description(), error: error), scope: record.scope, reporter: reporter)
    }

    static func deliver(_ event: FutureEvent, scope: FutureDiagnostics.Scope?, reporter: (@Sendable (FutureEvent) -> Void)?) {
        reporter?(event)
        scope?.onEvent?(event)
    }

    /// Reports an event about `node`, described by its record or by `fallback`.
    static func report(_ node: AnyObject, fallback: @autoclosure () -> FutureDescription, _ event: (FutureDescription) -> FutureEvent) {
        let key = ObjectIdentifier(node)
        let (record, reporter) = state.withLock { ($0.records[key], $0.reporter) }
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
        let descriptions = state.withLock { state in
            members.compactMap { state.records[ObjectIdentifier($0)]?.description() }
        }
        report(adopter, fallback: FutureDescription(id: nil, name: nil, kind: "future", file: "", line: 0)) {
            .cycle($0, members: descriptions)
        }
    }

    /// The tracked futures still pending (of `scope`, if given), oldest first.
    static func pending(in scope: FutureDiagnostics.Scope? = nil) -> [PendingFuture] {
        // Strong references, released after the table's lock: the last one frees a future, whose
        // deinit takes that lock.
        let live: [(Record, any TrackedNode)] = state.withLock { state in
            state.records.values.compactMap { record in
                if let scope, record.scope !== scope { return nil }
                return record.node.map { (record, $0) }
            }
        }
        let now = ContinuousClock.now
        let snapshots = live.map { ($0.0, $0.1.diagnosticSnapshot(), $0.1) }
        // Every record's id by the future's identity, for the edges.
        var ids: [ObjectIdentifier: UInt64] = [:]
        for (record, _, node) in snapshots { ids[ObjectIdentifier(node)] = record.id }
        // A future merged into another (a `flatMap`'s result absorbing the future it adopted)
        // shares its state: the one holding it waits on the merged futures, which wait on its
        // upstream.
        var merged: [ObjectIdentifier: [UInt64]] = [:]
        for (record, snapshot, node) in snapshots where snapshot.pending && snapshot.root != ObjectIdentifier(node) {
            merged[snapshot.root, default: []].append(record.id)
        }
        var result: [PendingFuture] = []
        for (record, snapshot, node) in snapshots where snapshot.pending {
            let key = ObjectIdentifier(node)
            var waits: [UInt64] = []
            if snapshot.root == key, let inner = merged[key] {
                waits = inner.sorted()
            } else if let upstream = snapshot.upstream, let id = ids[upstream] {
                waits = [id]
            }
            for member in record.members {
                guard let member = member.node, let id = ids[ObjectIdentifier(member)], member.diagnosticSnapshot().pending else { continue }
                waits.append(id)
            }
            result.append(PendingFuture(
                id: record.id, name: record.name, kind: String(describing: record.kind),
                file: String(describing: record.file), line: Int(record.line), age: record.made.duration(to: now),
                waitingOn: waits, consumers: snapshot.consumers, observers: snapshot.observers))
        }
        withExtendedLifetime(snapshots) {}
        return result.sorted { $0.id < $1.id }
    }

    /// Marks the given futures as reported stalled; returns those not reported before.
    static func markStalled(_ futures: [PendingFuture]) -> [(PendingFuture, FutureDiagnostics.Scope?)] {
        let wanted = Set(futures.map(\.id))
        var fresh: Set<UInt64> = []
        var scopes: [UInt64: FutureDiagnostics.Scope] = [:]
        state.withLock { state in
            for (key, record) in state.records where wanted.contains(record.id) && !record.reportedStalled {
                state.records[key]!.reportedStalled = true
                fresh.insert(record.id)
                if let scope = record.scope { scopes[record.id] = scope }
            }
        }
        return futures.filter { fresh.contains($0.id) }.map { ($0, scopes[$0.id]) }
    }
}

/// What diagnostics need of a future, whatever its value type.
protocol TrackedNode: AnyObject, Sendable {
    func diagnosticSnapshot() -> NodeSnapshot
}

/// A future's state as diagnostics see it.
struct NodeSnapshot {
    var pending: Bool
    /// The identity of the future holding its state (itself unless merged into another).
    var root: ObjectIdentifier
    /// What it waits on: its source, or the future it adopted.
    var upstream: ObjectIdentifier?
    var consumers: Int
    var observers: Int
}

extension FutureStorage: TrackedNode {
    func diagnosticSnapshot() -> NodeSnapshot {
        var upstream: AnyObject?  // released after the lock
        let snapshot = withState { node -> NodeSnapshot in
            upstream = node.upstream?.resolved
            let consumers = node.phase == .pending ? Int(node.consumers) : 0
            let callbacks = node.phase == .pending ? node.callbacks.count + (node.extras?.merge.observerCount ?? 0) : 0
            return NodeSnapshot(
                pending: node.phase == .pending, root: ObjectIdentifier(node), upstream: nil,
                consumers: consumers, observers: max(0, callbacks - consumers))
        }
        var result = snapshot
        result.upstream = upstream.map(ObjectIdentifier.init)
        releaseOutsideLock(upstream)
        return result
    }

    /// Starts tracking this future (made by `kind` at `file:line`), if it is not tracked yet.
    @usableFromInline @inline(never)
    final func track(kind: StaticString, file: StaticString, line: UInt, members: [AnyObject] = [], name: String? = nil, overriding: Bool = false) {
        LockTable.withLock(self) { flags |= StorageFlags.tracked }
        Tracking.track(
            self, kind: kind, file: file, line: line, members: members.compactMap { $0 as? any TrackedNode }, name: name,
            overriding: overriding)
    }

    /// Whether diagnostics track this future.
    final var isTracked: Bool { LockTable.withLock(self) { flag(StorageFlags.tracked) } }

    /// The outcome, as a reader that observes it: a failure read is not reported as unobserved.
    @usableFromInline
    final var observedOutcome: Outcome<Value>? {
        withState { node in
            node.flags |= StorageFlags.observed
            return node.result
        }
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
        Tracking.freed(ObjectIdentifier(self), unobservedFailure: unobserved)
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
