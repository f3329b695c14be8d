import Foundation

extension Future {
    /// Runs `operation` on each item, one after the other: each starts after the previous one
    /// succeeded, and the first failure stops the rest (OAPromise's serial promises).
    ///
    /// ```swift
    /// let uploaded = Future.serially(users) { user in user.uploadPicture() }
    /// ```
    ///
    /// Cancelling the result cancels the operation in flight and starts no more.
    ///
    /// - Parameters:
    ///   - items: the items, in order.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    ///   - operation: starts the work for one item.
    /// - Returns: the results, in input order.
    public static func serially<Item: Sendable, Element>(
        _ items: some Sequence<Item>,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ operation: @escaping @Sendable (Item) throws -> Future<Element>
    ) -> Future<[Element]> where Value == [Element] {
        inSeries(items, operation).made("serially", file, line)
    }

    /// ``serially(_:file:line:_:)`` without the call site, kept so that code naming this form
    /// still compiles; a call chooses the form above.
    @_disfavoredOverload
    public static func serially<Item: Sendable, Element>(
        _ items: some Sequence<Item>,
        _ operation: @escaping @Sendable (Item) throws -> Future<Element>
    ) -> Future<[Element]> where Value == [Element] {
        inSeries(items, operation)
    }

    static func inSeries<Item: Sendable, Element>(
        _ items: some Sequence<Item>,
        _ operation: @escaping @Sendable (Item) throws -> Future<Element>
    ) -> Future<[Element]> where Value == [Element] {
        let items = Array(items)
        let results = Guarded<[Element]>([])
        @Sendable func step(_ index: Int) -> Future<[Element]> {
            guard index < items.count else { return Future<[Element]>(value: results.withLock { $0 }) }
            let started: Future<Element>
            do { started = try operation(items[index]) } catch { return Future<[Element]>(error: error) }
            return started.flatMap(hop: .inline) { value in
                results.withLock { $0.append(value) }
                return step(index + 1)
            }
        }
        return step(0)
    }

    /// Runs `operation` on each item with at most `limit` operations in flight, starting the next
    /// item as one finishes (OAPromise's concurrent promises, with a limit).
    ///
    /// ```swift
    /// let thumbnails = Future.concurrently(photos, limit: 4, policy: .collectErrors) { photo in
    ///     makeThumbnail(of: photo)
    /// }
    /// ```
    ///
    /// The results are in input order and `policy` applies as in ``Future/all(_:policy:file:line:)``: with
    /// `.failFast`, the first failure fails the result and no further item starts. Cancelling the
    /// result cancels the operations in flight and starts no more.
    ///
    /// - Parameters:
    ///   - items: the items.
    ///   - limit: the most operations in flight at once (at least 1); by default, the number of
    ///     active processors.
    ///   - policy: what failures do.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    ///   - operation: starts the work for one item.
    /// - Returns: the results, in input order.
    public static func concurrently<Item: Sendable, Element>(
        _ items: some Sequence<Item>,
        limit: Int = ProcessInfo.processInfo.activeProcessorCount,
        policy: JoinPolicy = .failFast,
        file: StaticString = #fileID,
        line: UInt = #line,
        _ operation: @escaping @Sendable (Item) throws -> Future<Element>
    ) -> Future<[Element]> where Value == [Element] {
        precondition(limit >= 1, "concurrently needs a limit of at least 1")
        let items = Array(items)
        let slots = items.map { _ in Promise<Element>(file: file, line: line) }
        let joined = Future<[Element]>.all(slots.map(\.future), policy: policy, file: file, line: line)
            .made("concurrently", file, line, members: slots.map(\.future))
        let scheduler = Guarded(ItemScheduler(count: items.count))
        // Weak: the slots' callbacks hold `start`, and the join holds the slots.
        weak let result = joined.storage
        @Sendable func start(_ first: Int) {
            // Once the result is decided (it failed fast, or was cancelled), nothing more starts:
            // its cancellation frees the slots of the operations in flight, and each would
            // otherwise start the next item.
            guard let result, result.outcome == nil else { return }
            var candidate: Int? = first
            // Skip items whose slot was cancelled before they started (in a loop: a fail-fast
            // over a million items must not recurse a million times).
            while let index = candidate, !slots[index].future.isPending {
                candidate = scheduler.withLock { $0.finished() }
            }
            guard let index = candidate else { return }
            let started: Future<Element>
            do { started = try operation(items[index]) } catch { started = Future<Element>(error: error) }
            slots[index].complete(with: started)
            // On the slot, behind the join's member: a failure fails the join (which cancels the
            // slots not started yet) before the next item starts.
            slots[index].future.storage.register({ _ in scheduler.withLock { $0.finished() }.map(start) }, asConsumer: false)
        }
        for index in scheduler.withLock({ $0.initial(limit: limit) }) { start(index) }
        return joined
    }

    /// ``concurrently(_:limit:policy:file:line:_:)`` without the call site, kept so that code
    /// naming this form still compiles; a call chooses the form above.
    @_disfavoredOverload
    public static func concurrently<Item: Sendable, Element>(
        _ items: some Sequence<Item>,
        limit: Int = ProcessInfo.processInfo.activeProcessorCount,
        policy: JoinPolicy = .failFast,
        _ operation: @escaping @Sendable (Item) throws -> Future<Element>
    ) -> Future<[Element]> where Value == [Element] {
        concurrently(items, limit: limit, policy: policy, file: #fileID, line: #line, operation)
    }
}

/// Hands out item indices: the first `limit` at once, then one per finished operation.
struct ItemScheduler {
    let count: Int
    var next = 0

    init(count: Int) { self.count = count }

    mutating func initial(limit: Int) -> [Int] {
        let first = Array(0..<min(limit, count))
        next = first.count
        return first
    }

    /// An operation finished: the next index to start, if any.
    mutating func finished() -> Int? {
        guard next < count else { return nil }
        defer { next += 1 }
        return next
    }
}
