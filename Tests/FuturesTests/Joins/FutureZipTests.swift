import Testing
@testable import Futures

@Suite("zip")
struct FutureZipTests {
    @Test func zipsHeterogeneousValuesInArgumentOrder() async throws {
        let name = Promise<String>(), age = Promise<Int>(), tall = Promise<Bool>()
        let zipped = Future.zip(name.future, age.future, tall.future)
        tall.succeed(true)
        age.succeed(36)
        #expect(zipped.isPending)
        name.succeed("Ada")
        let (n, a, t) = try await zipped.value
        #expect(n == "Ada" && a == 36 && t)
    }

    @Test func theFirstFailureFailsAtOnceAndCancelsTheRest() {
        let a = Promise<String>(), b = Promise<Int>()
        let zipped = Future.zip(a.future, b.future)
        b.fail(TestError(code: 4))
        #expect((zipped.outcome?.error as? TestError)?.code == 4)
        #expect(a.isCancelled)
    }

    @Test func aMemberCancelledFromOutsideFailsTheZip() {
        let a = Promise<String>(), b = Promise<Int>()
        let zipped = Future.zip(a.future, b.future)
        a.future.cancel()
        #expect(zipped.outcome?.error as? FutureError == .cancelledMember)
    }

    @Test func cancellingTheZipCancelsItsMembers() {
        let a = Promise<String>(), b = Promise<Int>()
        let zipped = Future.zip(a.future, b.future)
        zipped.cancel()
        #expect(a.isCancelled && b.isCancelled)
    }

    @Test func zipOfOneAndOfMany() async throws {
        let one = try await Future.zip(Future(value: 1)).value
        #expect(one == 1)
        let many = try await Future.zip(Future(value: 1), Future(value: "2"), Future(value: 3.0), Future(value: [4]), Future(value: Character("5"))).value
        #expect(many.0 == 1 && many.1 == "2" && many.2 == 3.0 && many.3 == [4] && many.4 == "5")
    }
}
