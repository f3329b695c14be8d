// Built where Combine exists, or with the package trait FuturesCombine, which brings OpenCombine.
#if canImport(Combine) || FuturesCombine
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import Foundation
import Futures

extension Futures.Future {
    /// A future of the first value `publisher` emits.
    ///
    /// ```swift
    /// let subject = PassthroughSubject<Int, Never>()
    /// let first = Futures.Future(subject)
    /// subject.send(7)          // `first` succeeds with 7; the subscription is cancelled
    /// ```
    ///
    /// The future subscribes at once and asks for one value.
    /// - The first value completes it, and the subscription is cancelled: later values are not
    ///   produced for it.
    /// - A publisher that finishes without a value fails it with `FutureError.noValue`; one
    ///   that fails, with its error (an error that means cancellation makes it
    ///   `.cancelled`).
    /// - Cancelling the future, or every consumer of it withdrawing, cancels the subscription.
    /// - As with any Combine subscriber, the subscription lives until the publisher completes or
    ///   the subscription is cancelled: dropping the future does not end it, so cancel a pending
    ///   future you no longer need, as you would cancel an `AnyCancellable`. A publisher that lets
    ///   its subscriber go without completing fails the future with
    ///   `FutureError.brokenPromise(file:line:)`.
    ///
    /// - Parameters:
    ///   - publisher: the publisher whose first value the future takes.
    ///   - file: where the future is made, for `FutureError.brokenPromise(file:line:)` if
    ///     the source is released without completing it; leave the default.
    ///   - line: the line of `file`; leave the default.
    @inlinable
    public init<P: Publisher>(_ publisher: P, file: StaticString = #fileID, line: UInt = #line)
    where P.Output == Value {
        let promise = Promise<Value>(file: file, line: line)
        self = promise.future
        let subscriber = FirstValueSubscriber<Value, P.Failure>(promise: promise)
        // Weakly: the publisher's subscription keeps the subscriber (and so the promise) alive while
        // it may still send a value, and the future need not keep its producer. A publisher that
        // lets its subscriber go without completing then breaks the promise, rather than leaving
        // the future pending forever.
        promise.onCancel { [weak subscriber] in subscriber?.cancel() }
        publisher.subscribe(subscriber)
    }
}

/// Takes the first value of a publisher into a promise.
///
/// Only the first of a value, a completion or the future's cancellation acts; ``SubscriptionSlot``
/// decides which.
@usableFromInline
final class FirstValueSubscriber<Value: Sendable, Failure: Error>: Subscriber, Cancellable, Sendable {
    @usableFromInline typealias Input = Value

    @usableFromInline let slot = SubscriptionSlot()
    @usableFromInline let promise: Promise<Value>

    @inlinable
    init(promise: Promise<Value>) {
        self.promise = promise
    }

    @inlinable
    func receive(subscription: any Subscription) {
        if slot.fill(subscription) {
            subscription.request(.max(1))
        } else {
            subscription.cancel()
        }
    }

    @inlinable
    func receive(_ input: Value) -> Subscribers.Demand {
        slot.close()?.cancel()
        _ = promise.succeed(input)
        return .none
    }

    @inlinable
    func receive(completion: Subscribers.Completion<Failure>) {
        _ = slot.close()
        switch completion {
        case .finished: _ = promise.fail(FutureError.noValue)
        case .failure(let error): _ = promise.fail(error)
        }
    }

    /// The future was cancelled: cancels the subscription, or the one still to come.
    @inlinable
    func cancel() {
        slot.close()?.cancel()
    }
}

/// Where a subscriber keeps its subscription: empty → filled → closed, under a lock. Not generic,
/// so that the subscriber's unspecialised paths (Combine calls them through witness tables) do not
/// look up type metadata for it.
@usableFromInline
final class SubscriptionSlot: @unchecked Sendable {
    // Safety: `state` is read and written only while `lock` is held; `Subscription` need not be
    // Sendable, since Combine requires its methods to accept calls from any thread.
    private let lock = NSLock()
    private var state = State.empty

    private enum State {
        case empty
        case filled(any Subscription)
        case closed
    }

    @usableFromInline init() {}

    /// Keeps `subscription`; `false` if the slot was closed already (or filled: Combine sends one
    /// subscription per subscriber).
    @usableFromInline
    func fill(_ subscription: any Subscription) -> Bool {
        lock.withLockHeld {
            guard case .empty = state else { return false }
            state = .filled(subscription)
            return true
        }
    }

    /// Closes the slot; returns the subscription to cancel, if it held one.
    @usableFromInline
    func close() -> (any Subscription)? {
        lock.withLockHeld {
            defer { state = .closed }
            if case .filled(let subscription) = state { return subscription }
            return nil
        }
    }
}
#endif
