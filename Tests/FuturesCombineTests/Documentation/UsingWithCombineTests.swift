// The bridge is built where Combine exists, or with the package trait FuturesCombine.
#if canImport(Combine) || FuturesCombine
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import Futures
import FuturesCombine
import Testing

// The examples of the "Using with Combine" article.

@Suite struct UsingWithCombineTests {
    private func loadName() -> Futures.Future<String> { Futures.Future(error: Boom()) }

    @Test func aFutureAsAPublisher() async {
        let printed = Recorder<String>()
        func print(_ line: String) { printed.append(line) }
        await confirmation { received in
            let cancellable = loadName().publisher
                .replaceError(with: "nobody")
                .sink { name in print(name) }
            received()
            withExtendedLifetime(cancellable) {}
        }
        #expect(printed.all == ["nobody"])
    }

    @Test func cancellingTheSubscriptionWithdrawsIt() {
        let upload = Promise<Int>()
        let subscription = upload.future.publisher.sink(receiveCompletion: { _ in }, receiveValue: { _ in })
        subscription.cancel()
        // `upload.isCancelled` is now true: nobody wanted the result.
        #expect(upload.isCancelled)
    }

    @Test func spellingBothFutures() {
        let ours: Futures.Future<Int> = Futures.Future(value: 1)
        #if canImport(Combine)
        let theirs = Combine.Future<Int, Never> { $0(.success(2)) }
        #else
        let theirs = OpenCombine.Future<Int, Never> { $0(.success(2)) }
        #endif
        let sum = Futures.Future(theirs).map(on: .immediate) { $0 + (ours.outcome?.value ?? 0) }
        #expect(sum.outcome?.value == 3)
    }
}
#endif
