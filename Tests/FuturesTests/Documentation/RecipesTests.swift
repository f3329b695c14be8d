// The examples of the DocC articles "Recipes" and "Coming from other libraries", compiled and run.
import Foundation
import Testing
import Futures

// MARK: - The world the recipes live in

/// A stand-in for Core Data's context (not available on Linux): `perform` runs blocks one at a
/// time on its own queue, and objects are read by identifier.
final class NSManagedObjectContext: @unchecked Sendable {
    // Safety: `names` is immutable; the queue is thread-safe.
    let queue = DispatchQueue(label: "context")
    let key = DispatchSpecificKey<Bool>()
    let names: [Int: String]

    init(names: [Int: String]) {
        self.names = names
        queue.setSpecific(key: key, value: true)
    }

    func perform(_ block: @escaping () -> Void) {
        nonisolated(unsafe) let block = block
        queue.async { block() }
    }

    var isInPerform: Bool { DispatchQueue.getSpecific(key: key) == true }

    func object(with id: Int) -> ManagedObject {
        precondition(isInPerform, "objects are only touched inside perform")
        return ManagedObject(values: ["name": names[id] as Any])
    }
}

struct ManagedObject {
    let values: [String: Any]
    func value(forKey key: String) -> Any? { values[key] ?? nil }
}

struct Image: Equatable, Sendable {
    let name: String
    static let placeholder = Image(name: "placeholder")
}

@MainActor final class ImageView {
    var image: Image?
    var shown: [String] = []
    init() {}
}

enum Color: Sendable { case orange, blue }

final class Modal: Sendable {
    let dismissals = Counter()
    func dismiss() { dismissals.increment() }
}

struct Profile: Decodable, Sendable { let name: String }

let logLines = Recorder<String>()
func log(_ line: String) { logLines.append(line) }

let shownCounts = Recorder<Int>()
func show(_ count: Int) { shownCounts.append(count) }
let reportedErrors = Recorder<String>()
func report(_ error: any Error) { reportedErrors.append("\(error)") }

@Suite("Recipes and Coming from other libraries")
struct RecipesTests {
    @Test func coreDataContextAsAnExecutor() async throws {
        let context = NSManagedObjectContext(names: [1: "Ada", 2: "Grace"])
        func fetchPersonIDs() -> Future<[Int]> { Future(value: [1, 2]) }

        struct ContextExecutor: Executor, @unchecked Sendable {
            // A context may be used from any thread through `perform`, which is all this does.
            let context: NSManagedObjectContext

            func execute(_ work: @escaping @Sendable () -> Void) {
                context.perform { work() }
            }
        }

        let names = fetchPersonIDs().map(on: ContextExecutor(context: context)) { ids in
            ids.map { id in context.object(with: id).value(forKey: "name") as? String }
        }

        #expect(try await names.value == ["Ada", "Grace"])
    }

    @MainActor @Test func showingAValueAtOnceIfItIsThere() async {
        @MainActor
        func show(_ avatar: Future<Image>, in view: ImageView) {
            if let image = avatar.outcome?.value {
                view.image = image
            } else {
                view.image = .placeholder
                avatar.whenSuccess(on: .main) { image in view.image = image }
            }
        }

        let cached = ImageView()
        show(Future(value: Image(name: "ada")), in: cached)
        #expect(cached.image == Image(name: "ada"), "no placeholder, not even for a moment")

        let loading = ImageView()
        let promise = Promise<Image>()
        show(promise.future, in: loading)
        #expect(loading.image == .placeholder)
        promise.succeed(Image(name: "grace"))
        let shown = Promise<Void>()
        promise.future.whenSuccess(on: .main) { _ in shown.succeed(()) }  // after the recipe's callback
        _ = await shown.future.result
        #expect(loading.image == Image(name: "grace"))
    }

    @Test func aScreenThatReturnsAFuture() {
        let modal = Modal()
        let applied = Recorder<Color>()
        @Sendable func apply(_ color: Color) { applied.append(color) }

        final class ColorPicker: Sendable {
            private let choice = Promise<Color>()

            init(onCancel dismiss: @escaping @Sendable () -> Void) {
                choice.onCancel(dismiss)
            }

            var chosen: Future<Color> { choice.future }

            func userTapped(_ color: Color) { choice.succeed(color) }
            func userClosed() { choice.cancel() }
        }

        let picker = ColorPicker(onCancel: { modal.dismiss() })
        picker.chosen.whenSuccess(on: .immediate) { color in apply(color) }
        picker.userTapped(.orange)

        #expect(applied.all == [.orange])
        #expect(modal.dismissals.value == 0)

        // Closed without a choice: cancelled, and the screen is told.
        let closed = ColorPicker(onCancel: { modal.dismiss() })
        closed.userClosed()
        #expect(closed.chosen.outcome?.isCancelled == true)
        #expect(modal.dismissals.value == 1)

        // A caller that stops caring cancels the screen.
        let abandoned = ColorPicker(onCancel: { modal.dismiss() })
        abandoned.chosen.cancel()
        #expect(modal.dismissals.value == 2)

        // A screen that goes away without a word breaks its promise.
        var dropped: ColorPicker? = ColorPicker(onCancel: {})
        let chosen = dropped!.chosen
        dropped = nil
        if case .failure(FutureError.brokenPromise) = chosen.outcome {} else {
            Issue.record("expected a broken promise, got \(String(describing: chosen.outcome))")
        }
    }

    @Test func decodingJSONInATransform() async throws {
        let url = URL(string: "https://example.com/profile")!
        func download(_ url: URL) -> Future<Data> { Future(value: Data(#"{"name":"Ada"}"#.utf8)) }

        let profile = download(url).map(on: .global()) { data in
            try JSONDecoder().decode(Profile.self, from: data)
        }

        #expect(try await profile.value.name == "Ada")
        let broken = Future(value: Data("{".utf8)).map(on: .global()) { data in
            try JSONDecoder().decode(Profile.self, from: data)
        }
        #expect(await broken.result.error is DecodingError)
        let decoded = Counter()
        let cancelled = Future<Data>.cancelled.map(on: .global()) { data -> Profile in
            decoded.increment()
            return try JSONDecoder().decode(Profile.self, from: data)
        }
        #expect(await cancelled.result.isCancelled)
        #expect(decoded.value == 0)
    }

    @Test func loggingEveryOutcome() async throws {
        func loadProfile() -> Future<Profile> { Future(value: Profile(name: "Ada")) }

        func logged<Value>(_ future: Future<Value>, _ name: String) -> Future<Value> {
            future.always(on: .immediate) { outcome in log("\(name): \(outcome)") }
        }

        let profile = logged(loadProfile(), "profile")

        #expect(try await profile.value.name == "Ada")
        _ = logged(Future<Int>.cancelled, "cancelled one")
        #expect(logLines.all.contains("profile: success(Profile(name: \"Ada\"))"))
        #expect(logLines.all.contains("cancelled one: cancelled"))
    }

    @Test func aPromiseKitChainReadHere() async {
        let bytes = loadPerson(from: server)
            .flatMap { person in person.loadPicture(from: server) }
            .map { picture in picture.count }
        bytes.whenSuccess { count in show(count) }
        bytes.whenFailure { error in report(error) }

        #expect(await bytes.result.value == 3)
        let failed = loadPerson(from: disk).flatMap { person in person.loadPicture(from: disk) }
        #expect(await failed.result.error is CocoaError)
    }
}
