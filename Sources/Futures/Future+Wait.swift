import Dispatch
import Foundation

extension Future {
    /// Blocks the calling thread until the future completes, then returns its value or throws like
    /// ``value``: the error on failure, `CancellationError` if it was cancelled. For scripts,
    /// command-line tools and tests; everywhere else, `await` the ``value`` or register a callback.
    ///
    /// ```swift
    /// // main.swift of a command-line tool
    /// let answer = try Future(value: 41).map { $0 + 1 }.wait()
    /// print(answer)   // 42
    /// ```
    ///
    /// A complete future returns at once, wherever it is called. For a pending one, where it is
    /// called decides:
    ///
    /// - On the main queue, outside any job that the queue is running (the top-level code of a
    ///   command-line tool): it runs the main queue, through the main run loop, until the future
    ///   completes. Callbacks registered there with the default executor go to the main queue, so
    ///   they run while it waits.
    /// - In a place whose jobs the future may still need, it throws ``FutureError/blockingWait`` at
    ///   once instead of blocking forever, as SwiftNIO's `wait()` refuses to run on an event loop.
    ///   Those places are the executor of the library's job running on this thread (what
    ///   ``CurrentExecutor`` resolves to there, so every callback registered in that job with the
    ///   default executor waits behind it) unless that is a global queue, which runs jobs
    ///   concurrently; the main queue inside one of its jobs, which it cannot run again until that
    ///   job returns; and a callback running inline in a completion (`.immediate`), whose thread
    ///   runs the next callbacks only after it returns. The library does not know which executors
    ///   the steps upstream of the future will use, so it refuses whatever the future is: a dispatch
    ///   queue of yours counts as serial, and a custom executor as needing its thread.
    /// - Anywhere else (a thread of your own, a job on a global queue, a block you gave a queue
    ///   directly): it blocks the thread until the future completes. A callback on `.main` while
    ///   blocking off the main thread is fine; a step of the future on a queue whose job is the one
    ///   blocking is a deadlock the library cannot see.
    ///
    /// While it waits, the call is a consumer of the future, as an `await` is: the future is not
    /// cancelled for want of consumers.
    @available(*, noasync, message: "Use `try await future.value`: blocking a task's thread holds up the cooperative pool")
    public func wait() throws -> Value {
        try outcomeBlocking().get()
    }

    /// The outcome, blocking as ``wait()`` describes.
    func outcomeBlocking() throws(FutureError) -> Outcome<Value> {
        if let outcome = storage.observedOutcome { return outcome }
        let context = ThreadContext.existing
        if context?.isDraining == true { throw .blockingWait }
        if let context, context.currentBuiltIn != nil || context.currentCustom != nil {
            if context.currentAffinity?.isGlobal != true { throw .blockingWait }
        }
        if MainQueue.isCurrent { return try outcomeRunningTheMainQueue() }
        let semaphore = DispatchSemaphore(value: 0)
        storage.register({ _ in semaphore.signal() }, asConsumer: true, carryingContext: false)
        semaphore.wait()
        return storage.outcome!
    }

    /// Runs the main run loop, and so the main queue, until the future completes.
    private func outcomeRunningTheMainQueue() throws(FutureError) -> Outcome<Value> {
        // The completion wakes the run loop with an empty block on the main queue: a wait that the
        // main queue's own jobs end wakes anyway, as running a job returns from `run(mode:before:)`.
        storage.register({ _ in DispatchQueue.main.async {} }, asConsumer: true, carryingContext: false)
        while true {
            if let outcome = storage.outcome { return outcome }
            // `false`: the run loop has nothing it could run, which on the main thread means the
            // main queue is running a job already (a block given to it outside the library).
            guard RunLoop.main.run(mode: .default, before: .distantFuture) else {
                if let outcome = storage.outcome { return outcome }
                throw .blockingWait
            }
        }
    }
}
