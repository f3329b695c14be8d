import Testing
@testable import Futures

@Suite("Outcome")
struct OutcomeTests {
    @Test func accessorsReportTheCase() {
        let success = Outcome<Int>.success(3)
        let failure = Outcome<Int>.failure(TestError())
        let cancelled = Outcome<Int>.cancelled
        #expect(success.value == 3 && success.isSuccess && !success.isFailure && !success.isCancelled)
        #expect(failure.value == nil && failure.error is TestError && failure.isFailure)
        #expect(cancelled.value == nil && cancelled.error == nil && cancelled.isCancelled)
    }

    @Test func getThrowsTheErrorOrCancellation() throws {
        #expect(try Outcome<Int>.success(4).get() == 4)
        #expect(throws: TestError.self) { try Outcome<Int>.failure(TestError()).get() }
        #expect(throws: CancellationError.self) { try Outcome<Int>.cancelled.get() }
    }

    @Test func resultConversionsRoundTrip() throws {
        let fromSuccess = Outcome(Result<Int, TestError>.success(1))
        #expect(fromSuccess.value == 1)
        let fromFailure = Outcome(Result<Int, TestError>.failure(TestError(code: 7)))
        #expect((fromFailure.error as? TestError)?.code == 7)
        let fromCancellation = Outcome(Result<Int, CancellationError>.failure(CancellationError()))
        #expect(fromCancellation.isCancelled)

        #expect(try Result(Outcome<Int>.success(2)).get() == 2)
        #expect(throws: CancellationError.self) { try Result(Outcome<Int>.cancelled).get() }
        #expect(throws: TestError.self) { try Outcome<Int>.failure(TestError()).result.get() }
    }

    @Test func catchingMapsCancellationErrorToCancelled() {
        #expect(Outcome { 5 }.value == 5)
        #expect(Outcome<Int> { throw TestError() }.isFailure)
        #expect(Outcome<Int> { throw CancellationError() }.isCancelled)
    }

    @Test func mapTransformsOnlySuccess() {
        #expect(Outcome.success(2).map { $0 * 10 }.value == 20)
        #expect(Outcome<Int>.failure(TestError()).map { $0 * 10 }.isFailure)
        #expect(Outcome<Int>.cancelled.map { $0 * 10 }.isCancelled)
    }

    @Test func descriptionNamesTheCase() {
        #expect(Outcome.success(1).description == "success(1)")
        #expect(Outcome<Int>.cancelled.description == "cancelled")
        #expect(Outcome<Int>.failure(FutureError.timedOut).description == "failure(timed out)")
    }
}
