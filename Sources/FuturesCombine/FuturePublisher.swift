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
    /// A publisher that emits this future's value and finishes, or fails with its error.
    ///
    /// ```swift
    /// let cancellable = loadName().publisher
    ///     .replaceError(with: "nobody")
    ///     .sink { name in print(name) }
    /// ```
    ///
    /// - A `.cancelled` future fails the subscription with `CancellationError`.
    /// - The value is not sent before the subscriber asks for it; a value that arrives earlier
    ///   waits for the demand. A failure needs no demand, as everywhere in Combine.
    /// - Each subscription is one of this future's consumers, like a future derived from it:
    ///   cancelling the subscription withdraws it, and when every consumer of the future has
    ///   withdrawn the future is cancelled, which tells its producer.
    /// - The value and completion are sent on the thread that completes the future, or on the one
    ///   that asks for demand if the future is already complete; use `receive(on:)` to move them.
    public var publisher: FuturePublisher<Value> { FuturePublisher(self) }
}

/// The publisher of a future's outcome (`Future.publisher`).
public struct FuturePublisher<Value: Sendable>: Publisher, Sendable {
    /// The future's value.
    public typealias Output = Value
    /// The future's error, or `CancellationError` for a cancelled future.
    public typealias Failure = any Error

    /// The future this publisher follows.
    public let future: Futures.Future<Value>

    /// Creates a publisher of `future`'s outcome; prefer `Future.publisher`.
    public init(_ future: Futures.Future<Value>) {
        self.future = future
    }

    /// Attaches `subscriber`: the subscription becomes one of the future's consumers.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Value, S.Failure == any Error {
        // The subscription is a consumer from the start (a future derived with `map` is one), so the
        // future is not cancelled for want of consumers while the subscriber receives it.
        let subscription = FutureSubscription(subscriber: subscriber, consumer: future.consumer())
        subscriber.receive(subscription: subscription)
        subscription.follow()
    }
}

/// One subscriber's view of a future.
///
/// States: `subscribed` (waiting for demand and for the outcome, in either order; a failure does
/// not wait for demand) → `finished` (the outcome was sent, or the subscriber cancelled). Every change happens under `lock`; the
/// subscriber and the future are called after it is released, so a subscriber that asks for demand
/// or cancels from inside a call it receives does not deadlock.
final class FutureSubscription<Value: Sendable, Downstream: Subscriber>: Subscription, OutcomeReceiver, @unchecked Sendable
where Downstream.Input == Value, Downstream.Failure == any Error {
    // Safety: `state` is read and written only while `lock` is held. `Downstream` need not be
    // Sendable: it is called at most twice in a row (value, then completion) by the one thread that
    // takes it out of `state`, which happens once; Combine requires its subscribers to accept calls
    // from any thread.
    private let lock = NSLock()
    private var state: State

    private enum State {
        case subscribed(Downstream, demanded: Bool, outcome: Outcome<Value>?)
        case finished
    }

    private let consumer: Futures.Future<Value>

    init(subscriber: Downstream, consumer: Futures.Future<Value>) {
        self.consumer = consumer
        state = .subscribed(subscriber, demanded: false, outcome: nil)
    }

    /// Starts listening to the consumer, once the subscriber has received the subscription (it may
    /// have asked for demand, or cancelled, from inside `receive(subscription:)`).
    func follow() {
        // Seen through a protocol, so the callback does not capture the subscriber's type.
        let receiver: any OutcomeReceiver<Value> = self
        consumer.whenComplete(on: .immediate) { outcome in
            receiver.receive(outcome)
        }
    }

    func request(_ demand: Subscribers.Demand) {
        precondition(demand > .none, "a subscriber asked for a demand of zero, which Combine forbids")
        let delivery: (Downstream, Outcome<Value>)? = lock.withLockHeld {
            guard case .subscribed(let subscriber, false, let outcome) = state else { return nil }
            guard let outcome else {
                state = .subscribed(subscriber, demanded: true, outcome: nil)
                return nil
            }
            state = .finished
            return (subscriber, outcome)
        }
        if let (subscriber, outcome) = delivery { send(outcome, to: subscriber) }
    }

    func cancel() {
        let subscriber: Downstream? = lock.withLockHeld {
            guard case .subscribed(let subscriber, _, _) = state else { return nil }
            state = .finished
            return subscriber
        }
        // The subscriber is released here, outside the lock, as Combine asks of a cancelled
        // subscription; the consumer withdraws from the future.
        withExtendedLifetime(subscriber) {}
        if subscriber != nil { consumer.cancel() }
    }

    func receive(_ outcome: Outcome<Value>) {
        let subscriber: Downstream? = lock.withLockHeld {
            guard case .subscribed(let subscriber, let demanded, .none) = state else { return nil }
            // A value waits for demand; a failure needs none (Combine sends completions unasked).
            guard demanded || !outcome.isSuccess else {
                state = .subscribed(subscriber, demanded: false, outcome: outcome)
                return nil
            }
            state = .finished
            return subscriber
        }
        if let subscriber { send(outcome, to: subscriber) }
    }

    private func send(_ outcome: Outcome<Value>, to subscriber: Downstream) {
        switch outcome.result {
        case .success(let value):
            _ = subscriber.receive(value)
            subscriber.receive(completion: .finished)
        case .failure(let error):
            subscriber.receive(completion: .failure(error))
        }
    }
}

/// Something that takes a future's outcome.
protocol OutcomeReceiver<Value>: AnyObject, Sendable {
    associatedtype Value: Sendable
    func receive(_ outcome: Outcome<Value>)
}

extension FutureSubscription: CustomStringConvertible {
    var description: String { "Future" }
}
#endif
