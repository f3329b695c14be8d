// The examples of the DocC article "Progress", compiled and run.
import Foundation
import FuturesTestHelpers
import Testing
import Futures

func chunks(of url: URL) -> [Data] { Array(repeating: Data(count: 250), count: 4) }

func loadFile(at url: URL) -> Future<Data> {
    Future { promise in
        DispatchQueue.global().async {
            var data = Data()
            for chunk in chunks(of: url) {
                data.append(chunk)
                promise.progress = Double(data.count) / 1_000
            }
            promise.succeed(data)
        }
    }
}

@Suite("Progress article")
struct ProgressArticleTests {
    @Test func watching() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let file = loadFile(at: url)
        file.whenProgress { fraction in
            print("\(Int(fraction * 100))%")
        }
        #expect(try await file.value.count == 1_000)
        #expect(file.progress == 1)
        // Reports may be coalesced; the last one is the whole.
        let lines = await printed.first(1)
        #expect(Set(lines).isSubset(of: ["25%", "50%", "75%", "100%"]))
        #expect(await printed.contains("100%"))
    }

    @Test func combinedProgress() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let picture = loadPerson(from: disk).flatMap(progressWeight: 0.3) { person in
            person.loadPicture(from: server)
        }
        picture.whenProgress { print("combined progress = \($0)") }
        #expect(try await picture.value == Data([1, 2, 3]))
        #expect(picture.progress == 1)
        #expect(await printed.contains("combined progress = 1.0"))
    }

    @Test func joinProgress() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let album = Future.all([loadPicture(1), loadPicture(3), loadPicture(4), loadPicture(5)])
        album.whenProgress { print("album: \(Int($0 * 100))%") }
        let seen = Recorder<Double>()
        album.whenProgress(on: .immediate) { seen.append($0) }
        #expect(try await album.value.map(\.count) == [1, 3, 4, 5])
        #expect(album.progress == 1)
        #expect(Set(seen.all).isSubset(of: [0.25, 0.5, 0.75, 1]) && seen.all.last == 1)
        #expect(await printed.contains("album: 100%"))
        #expect(Set(printed.all).isSubset(of: ["album: 25%", "album: 50%", "album: 75%", "album: 100%"]))
    }

    @Test func asyncSequences() async {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let file = loadFile(at: url)
        for await fraction in file.progressUpdates {
            print(fraction)
        }
        #expect(file.progress == 1, "the sequence ended because the future completed")
        #expect(Set(printed.all).isSubset(of: ["0.0", "0.25", "0.5", "0.75", "1.0"]))
    }

    @Test func foundationProgress() async throws {
        let file = loadFile(at: url)
        let foundation = file.makeProgress()
        let promise = Promise<Data>()
        promise.follow(foundation)
        _ = try await file.value
        #expect(foundation.fractionCompleted == 1)
        promise.succeed(Data())
    }
}
