// The bridge is built where Combine exists, or with the package trait FuturesCombine.
#if canImport(Combine) || FuturesCombine
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import Foundation
import FuturesTestHelpers
import Futures
import FuturesCombine
import Testing

typealias Recorder<Element: Sendable> = FuturesTestHelpers.Recorder<Element>

struct Boom: Error, Equatable {}

/// A subscriber that asks for nothing until told to, and records what it gets.
final class ManualSubscriber<Input: Sendable>: Subscriber, @unchecked Sendable {
    typealias Failure = any Error
    // Safety: `subscription` is set once, in `receive(subscription:)`, before the test reads it on
    // the same thread (every publisher here subscribes synchronously).
    var subscription: (any Subscription)?
    let events = Recorder<String>()
    let cancelOnSubscribe: Bool
    let demandOnSubscribe: Subscribers.Demand

    init(cancelOnSubscribe: Bool = false, demandOnSubscribe: Subscribers.Demand = .none) {
        self.cancelOnSubscribe = cancelOnSubscribe
        self.demandOnSubscribe = demandOnSubscribe
    }

    func receive(subscription: any Subscription) {
        self.subscription = subscription
        if cancelOnSubscribe { subscription.cancel() }
        if demandOnSubscribe > .none { subscription.request(demandOnSubscribe) }
    }

    func receive(_ input: Input) -> Subscribers.Demand {
        events.append("value \(input)")
        return .none
    }

    func receive(completion: Subscribers.Completion<any Error>) {
        switch completion {
        case .finished: events.append("finished")
        case .failure(let error): events.append("failure \(type(of: error))")
        }
    }
}

/// Cancels another consumer of the future from inside `receive(subscription:)`, then asks for one value.
final class WithdrawingSubscriber: Subscriber, @unchecked Sendable {
    typealias Input = Int
    typealias Failure = any Error
    // Safety: the publisher calls it on one thread at a time, as Combine requires.
    let events = Recorder<String>()
    let other: Futures.Future<Int>

    init(other: Futures.Future<Int>) { self.other = other }

    func receive(subscription: any Subscription) {
        other.cancel()
        subscription.request(.max(1))
    }

    func receive(_ input: Int) -> Subscribers.Demand {
        events.append("value \(input)")
        return .none
    }

    func receive(completion: Subscribers.Completion<any Error>) {}
}

@Suite struct FuturePublisherTests {
    @Test func sendsTheValueThenFinishes() {
        let subscriber = ManualSubscriber<Int>(demandOnSubscribe: .unlimited)
        Future(value: 3).publisher.subscribe(subscriber)
        #expect(subscriber.events.all == ["value 3", "finished"])
    }

    @Test func sendsNothingBeforeDemand() {
        let promise = Promise<Int>()
        let subscriber = ManualSubscriber<Int>()
        promise.future.publisher.subscribe(subscriber)
        _ = promise.succeed(4)
        #expect(subscriber.events.all.isEmpty)
        subscriber.subscription?.request(.max(1))
        #expect(subscriber.events.all == ["value 4", "finished"])
    }

    @Test func demandBeforeTheOutcomeWaitsForIt() {
        let promise = Promise<Int>()
        let subscriber = ManualSubscriber<Int>()
        promise.future.publisher.subscribe(subscriber)
        subscriber.subscription?.request(.max(1))
        #expect(subscriber.events.all.isEmpty)
        _ = promise.succeed(5)
        #expect(subscriber.events.all == ["value 5", "finished"])
    }

    @Test func aFailureFailsTheSubscription() {
        let subscriber = ManualSubscriber<Int>(demandOnSubscribe: .max(1))
        Future<Int>(error: Boom()).publisher.subscribe(subscriber)
        #expect(subscriber.events.all == ["failure Boom"])
    }

    @Test func aFailureNeedsNoDemand() {
        let promise = Promise<Int>()
        let subscriber = ManualSubscriber<Int>()
        promise.future.publisher.subscribe(subscriber)
        _ = promise.fail(Boom())
        #expect(subscriber.events.all == ["failure Boom"])
    }

    @Test func theSubscriptionIsAConsumerWhileTheSubscriberReceivesIt() {
        // The future's only other consumer withdraws while the subscriber is receiving the
        // subscription: the subscription keeps the future going.
        let promise = Promise<Int>()
        let other = promise.future.map { $0 }
        let subscriber = WithdrawingSubscriber(other: other)
        promise.future.publisher.subscribe(subscriber)
        #expect(!promise.isCancelled)
        _ = promise.succeed(2)
        #expect(subscriber.events.all == ["value 2"])
    }

    @Test func aCancelledFutureFailsWithCancellationError() {
        let subscriber = ManualSubscriber<Int>(demandOnSubscribe: .max(1))
        Future<Int>.cancelled.publisher.subscribe(subscriber)
        #expect(subscriber.events.all == ["failure CancellationError"])
    }

    @Test func cancellingTheSubscriptionWithdrawsItAsAConsumer() {
        let promise = Promise<Int>()
        let subscriber = ManualSubscriber<Int>()
        promise.future.publisher.subscribe(subscriber)
        #expect(!promise.isCancelled)
        subscriber.subscription?.cancel()
        // It was the future's only consumer.
        #expect(promise.isCancelled)
        #expect(subscriber.events.all.isEmpty)
    }

    @Test func eachSubscriptionIsAConsumerOfItsOwn() {
        let promise = Promise<Int>()
        let first = promise.future.publisher.sink(receiveCompletion: { _ in }, receiveValue: { _ in })
        let second = promise.future.publisher.sink(receiveCompletion: { _ in }, receiveValue: { _ in })
        first.cancel()
        #expect(!promise.isCancelled)
        second.cancel()
        #expect(promise.isCancelled)
    }

    @Test func anotherConsumerKeepsTheFutureGoing() {
        let promise = Promise<Int>()
        let other = promise.future.map { $0 * 2 }
        let subscriber = ManualSubscriber<Int>()
        promise.future.publisher.subscribe(subscriber)
        subscriber.subscription?.cancel()
        #expect(!promise.isCancelled)
        _ = promise.succeed(1)
        #expect(subscriber.events.all.isEmpty)   // a cancelled subscription hears nothing
        withExtendedLifetime(other) {}
    }

    @Test func aSubscriberThatCancelsAtOnceGetsNothing() {
        let subscriber = ManualSubscriber<Int>(cancelOnSubscribe: true, demandOnSubscribe: .max(1))
        let promise = Promise<Int>()
        promise.future.publisher.subscribe(subscriber)
        _ = promise.succeed(1)
        #expect(subscriber.events.all.isEmpty)
    }

    @Test func theExampleRuns() async {
        let names = Recorder<String>()
        await confirmation { received in
            let cancellable = loadName().publisher
                .replaceError(with: "nobody")
                .sink { name in
                    names.append(name)
                    received()
                }
            withExtendedLifetime(cancellable) {}
        }
        #expect(names.all == ["Ada"])
    }

    @Test func valuesArriveOnTheCompletingThread() async {
        let promise = Promise<Int>()
        let threads = Recorder<ObjectIdentifier>()
        let subscriber = ManualSubscriber<Int>(demandOnSubscribe: .max(1))
        promise.future.publisher
            .handleEvents(receiveOutput: { _ in threads.append(ObjectIdentifier(Thread.current)) })
            .subscribe(subscriber)
        await withCheckedContinuation { done in
            Thread.detachNewThread {
                threads.append(ObjectIdentifier(Thread.current))
                _ = promise.succeed(1)
                done.resume()
            }
        }
        #expect(threads.all.count == 2 && threads.all[0] == threads.all[1])
        #expect(subscriber.events.all == ["value 1", "finished"])
    }

    private func loadName() -> Futures.Future<String> { Future(value: "Ada") }
}

/// A publisher that hands its subscriber a subscription holding it (as Combine's own do), or, if
/// `holdsSubscriber` is false, a subscription that lets it go at once.
struct ProbePublisher: Publisher {
    typealias Output = Int
    typealias Failure = Never
    let holdsSubscriber: Bool
    let made: Recorder<ProbeSubscription>

    func receive<S: Subscriber>(subscriber: S) where S.Input == Int, S.Failure == Never {
        let subscription = ProbeSubscription(subscriber: holdsSubscriber ? AnySubscriber(subscriber) : nil)
        made.append(subscription)
        subscriber.receive(subscription: subscription)
    }
}

final class ProbeSubscription: Subscription, @unchecked Sendable {
    // Safety: set in `init`, cleared only by `cancel`, which the tests call on one thread.
    var subscriber: AnySubscriber<Int, Never>?
    init(subscriber: AnySubscriber<Int, Never>?) { self.subscriber = subscriber }
    func request(_ demand: Subscribers.Demand) {}
    func cancel() { subscriber = nil }
}

@Suite struct FutureFromPublisherTests {
    @Test func aPublisherThatLetsItsSubscriberGoBreaksThePromise() {
        let made = Recorder<ProbeSubscription>()
        let future = Futures.Future(ProbePublisher(holdsSubscriber: false, made: made))
        guard case .brokenPromise? = future.outcome?.error as? FutureError else {
            Issue.record("expected a broken promise, got \(String(describing: future.outcome))")
            return
        }
    }

    @Test func cancellingAFutureWhoseSubscriberIsHeldCancelsTheSubscription() {
        let made = Recorder<ProbeSubscription>()
        let future = Futures.Future(ProbePublisher(holdsSubscriber: true, made: made))
        #expect(made.all.first?.subscriber != nil)
        future.cancel()
        #expect(made.all.first?.subscriber == nil)
    }

    @Test func takesTheFirstValueAndCancelsTheSubscription() {
        let events = Recorder<String>()
        let subject = PassthroughSubject<Int, Never>()
        let first = Futures.Future(subject.handleEvents(
            receiveCancel: { events.append("cancel") },
            receiveRequest: { events.append("request \($0)") }
        ))
        #expect(first.isPending)
        subject.send(7)
        subject.send(8)
        #expect(first.outcome?.value == 7)
        #expect(events.all == ["request max(1)", "cancel"])
    }

    @Test func theExampleRuns() {
        let subject = PassthroughSubject<Int, Never>()
        let first = Futures.Future(subject)
        subject.send(7)          // `first` succeeds with 7; the subscription is cancelled
        #expect(first.outcome?.value == 7)
    }

    @Test func aPublisherThatFinishesEmptyFailsWithNoValue() {
        let empty = Futures.Future(Empty<Int, Never>())
        #expect(empty.outcome?.error as? FutureError == .noValue)
        #expect(FutureError.noValue.description == "no value: the source finished without producing a value")
    }

    @Test func aFailingPublisherFailsTheFuture() {
        let failed = Futures.Future(Fail<Int, Boom>(error: Boom()))
        #expect(failed.outcome?.error as? Boom == Boom())
    }

    @Test func aPublisherFailingWithCancellationCancelsTheFuture() {
        let failed = Futures.Future(Fail<Int, CancellationError>(error: CancellationError()))
        #expect(failed.outcome?.isCancelled == true)
    }

    @Test func cancellingTheFutureCancelsTheSubscription() {
        let events = Recorder<String>()
        let subject = PassthroughSubject<Int, Never>()
        let future = Futures.Future(subject.handleEvents(receiveCancel: { events.append("cancel") }))
        #expect(future.cancel())
        #expect(events.all == ["cancel"])
        subject.send(1)
        #expect(future.outcome?.isCancelled == true)
    }

    @Test func everyConsumerWithdrawingCancelsTheSubscription() {
        let events = Recorder<String>()
        let subject = PassthroughSubject<Int, Never>()
        let future = Futures.Future(subject.handleEvents(receiveCancel: { events.append("cancel") }))
        let doubled = future.map { $0 * 2 }
        #expect(doubled.cancel())
        #expect(events.all == ["cancel"])
    }

    @Test func aSynchronousPublisherCompletesAtOnce() {
        #expect(Futures.Future(Just(1)).outcome?.value == 1)
        #expect(Futures.Future([1, 2, 3].publisher).outcome?.value == 1)
    }

    @Test func aRoundTripKeepsTheValue() {
        let back = Futures.Future(Future(value: "round").publisher)
        #expect(back.outcome?.value == "round")
    }
}
/// The context carried into callbacks (``FutureContext``) crosses the bridge both ways.
@Suite struct CombineContextTests {
    init() { _ = contextCarriersInstalled }

    @Test func aSubscribersValueArrivesWithTheContextWhereItSubscribed() {
        let promise = Promise<Int>()
        let seen = Recorder<String?>()
        let subscription = TestContext.$label.withValue("subscribed") {
            promise.future.publisher.sink(receiveCompletion: { _ in }, receiveValue: { _ in seen.append(TestContext.label) })
        }
        TestContext.$label.withValue("completer") { _ = promise.succeed(1) }
        #expect(seen.all == ["subscribed"])
        subscription.cancel()
    }

    @Test func aCallbackOnAFutureOfAPublisherRunsWithTheContextOfItsRegistration() {
        let subject = PassthroughSubject<Int, Never>()
        let future = Futures.Future(subject)
        let seen = Recorder<String?>()
        TestContext.$label.withValue("registered") {
            future.whenSuccess(on: .immediate) { _ in seen.append(TestContext.label) }
        }
        TestContext.$label.withValue("sender") { subject.send(1) }
        #expect(seen.all == ["registered"])
    }
}
#endif
