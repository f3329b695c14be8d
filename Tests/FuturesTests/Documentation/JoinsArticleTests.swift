// The examples of the DocC article "Joins and Races", compiled and run.
import Foundation
import FuturesTestHelpers
import Testing
import Futures

func loadPicture(_ number: Int) -> Future<Data> {
    Future(on: .global()) {
        guard number != 2 else { throw CocoaError(.fileNoSuchFile) }
        return Data(repeating: UInt8(number), count: number)
    }
}

@Suite("Joins article")
struct JoinsArticleTests {
    @Test func allWithAPolicy() async {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let pictures = Future.all([loadPicture(1), loadPicture(2), loadPicture(3)], policy: .collectErrors)
        pictures.whenComplete { outcome in
            if case .failure(let error as JoinError) = outcome {
                for failure in error.failures { print("picture \(failure.index): \(failure.error)") }
            }
        }
        let outcome = await pictures.result
        #expect((outcome.error as? JoinError)?.failures.map(\.index) == [1])
        let lines = await printed.first(1)
        #expect(lines.count == 1 && lines[0].hasPrefix("picture 1: "))
    }

    @Test func zip() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let profile = Future.zip(loadPerson(from: disk), loadPicture(1))
        profile.whenSuccess { person, picture in print(person.name, picture.count) }
        let (person, picture) = try await profile.value
        #expect(person.name == "Ada" && picture.count == 1)
        #expect(await printed.first(1) == ["Ada 1"])
    }

    @Test func inCompletionOrder() async {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        for await (index, outcome) in [loadPicture(1), loadPicture(2)].outcomesInCompletionOrder() {
            print("picture \(index + 1): \(outcome)")
        }
        // The loop ended: both outcomes were delivered (the sequence ends after the last one).
        #expect(await Future.allSettled([loadPicture(1), loadPicture(2)]).result.value?.count == 2)
        #expect(printed.all.count == 2)
        #expect(printed.all.contains("picture 1: success(1 bytes)"))
        #expect(printed.all.contains { $0.hasPrefix("picture 2: failure(") })
    }

    @Test func aFewAtATime() async throws {
        let uploads = Future.concurrently([1, 2, 3, 4], limit: 2, policy: .ignoreErrors) { number in
            loadPicture(number)
        }
        #expect(try await uploads.value.map(\.count) == [1, 3, 4])
    }

    @Test func aQueueOfOperations() async throws {
        let queue = FutureQueue(maxConcurrent: 1)
        let first = queue.add { loadPicture(1) }
        let second = queue.add { loadPicture(3) }   // starts when the first finishes
        #expect(try await first.value.count == 1)
        #expect(try await second.value.count == 3)
    }

    @Test func races() async throws {
        let fastest = Future.any([loadPerson(from: disk), loadPerson(from: server)])
        #expect(try await fastest.value.name == "Ada")
    }
}
