// The examples of the combinator guides (All, Zip, RaceAndAny, OrderedByCompletion,
// RacingOperations, SeriallyAndConcurrently, Deferred, Queues, Caching, Operations, Retry,
// TimeOperators), compiled and run. `.ci/check-examples` checks that every Swift block of the DocC
// articles appears in a test file, line for line.
import Foundation
import FuturesTestHelpers
import Testing
@testable import Futures
import FuturesTestSupport

// MARK: - The world the guides' examples live in

struct Photo: Sendable, Equatable {
    let name: String
    let bytes: Int

    static let placeholder = Photo(name: "placeholder", bytes: 0)
}

struct Receipt: Sendable, Equatable {
    let album: String
}

enum ServiceError: Error, Equatable {
    case notFound(String)
    case offline
}

/// A stand-in for a photo and backup service. It answers on a global queue: with the photo (or the
/// upload receipt), or with `ServiceError.notFound` for the names in `missing`. A request for a name
/// in `held` stays in flight until the test calls `release(_:)` or `fail(_:with:)`, which complete it
/// on the calling thread. It records what was asked, in order, how many requests ran at once, and
/// which requests were cancelled.
final class PhotoService: Sendable {
    private struct State {
        var held: Set<String>
        var requests: [String] = []
        var running = 0
        var mostRunning = 0
        var waiting: [String: [@Sendable ((any Error)?) -> Void]] = [:]
        var cancelled: Set<String> = []
        var cancelWatchers: [String: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let missing: Set<String>
    private let state: Locked<State>

    init(missing: Set<String> = [], held: Set<String> = []) {
        self.missing = missing
        state = Locked(State(held: held))
    }

    func download(_ name: String) -> Future<Photo> {
        request(name) { Photo(name: name, bytes: 100 * name.count) }
    }

    func upload(_ album: String) -> Future<Receipt> {
        request(album) { Receipt(album: album) }
    }

    /// Completes the held requests for `name` with their answer.
    func release(_ name: String) { finish(name, with: nil) }

    /// Fails the held requests for `name`.
    func fail(_ name: String, with error: any Error) { finish(name, with: error) }

    /// The names asked for, in order.
    var requests: [String] { state.withLock { $0.requests } }

    /// The most requests that were in flight at once.
    var mostRunning: Int { state.withLock { $0.mostRunning } }

    func isCancelled(_ name: String) -> Bool { state.withLock { $0.cancelled.contains(name) } }

    /// Returns once a request for `name` has been cancelled.
    func cancelled(_ name: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.cancelled.contains(name) { return true }
                state.cancelWatchers[name, default: []].append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func request<Answer: Sendable>(
        _ name: String,
        answer: @escaping @Sendable () -> Answer
    ) -> Future<Answer> {
        let promise = Promise<Answer>()
        let done = Locked(false)
        let isHeld = state.withLock { state -> Bool in
            state.requests.append(name)
            state.running += 1
            state.mostRunning = max(state.mostRunning, state.running)
            return state.held.contains(name)
        }
        // The service's state holds held requests' `finish`, so what they capture holds it weakly.
        let stopRunning: @Sendable () -> Bool = { [weak state] in
            guard done.withLock({ done in defer { done = true }; return !done }) else { return false }
            state?.withLock { $0.running -= 1 }
            return true
        }
        let finish: @Sendable ((any Error)?) -> Void = { [missing] error in
            guard stopRunning() else { return }
            if let error {
                promise.fail(error)
            } else if missing.contains(name) {
                promise.fail(ServiceError.notFound(name))
            } else {
                promise.succeed(answer())
            }
        }
        promise.onCancel { [weak state] in
            _ = stopRunning()
            let watchers: [CheckedContinuation<Void, Never>] = state?.withLock { state in
                state.cancelled.insert(name)
                return state.cancelWatchers.removeValue(forKey: name) ?? []
            } ?? []
            for watcher in watchers { watcher.resume() }
        }
        if isHeld {
            state.withLock { $0.waiting[name, default: []].append(finish) }
        } else {
            DispatchQueue.global().async { finish(nil) }
        }
        return promise.future
    }

    private func finish(_ name: String, with error: (any Error)?) {
        let waiting = state.withLock { $0.waiting.removeValue(forKey: name) ?? [] }
        for finish in waiting { finish(error) }
    }
}

struct User: Sendable, Equatable {
    let id: Int
    let name: String
}

/// A stand-in account service; `profile(id:)` fails with `.offline` its first `flakyCalls` times.
final class AccountService: Sendable {
    private let calls = Locked(0)
    private let flakyCalls: Int

    init(flakyCalls: Int = 0) { self.flakyCalls = flakyCalls }

    func user(id: Int) -> Future<User> { Future(on: .global()) { User(id: id, name: "Grace") } }

    func unreadCount(for id: Int) -> Future<Int> { Future(on: .global()) { 3 } }

    func profile(id: Int) -> Future<User> {
        let call = calls.withLock { calls in
            calls += 1
            return calls
        }
        return Future(on: .global()) {
            guard call > self.flakyCalls else { throw ServiceError.offline }
            return User(id: id, name: "Grace")
        }
    }

    var profileCalls: Int { calls.withLock { $0 } }
}

/// A connection that a cancellation token hangs up.
final class Connection: Sendable {
    let host: String
    private let open = Locked(true)

    init(host: String) { self.host = host }

    var isOpen: Bool { open.withLock { $0 } }

    func close() { open.withLock { $0 = false } }
}

/// A stand-in network: a connection attempt is pending until the test calls `accept(_:)`; its
/// token stops the attempt, or hangs up the connection once made.
final class Network: Sendable {
    private let attempts = Locked<[String: (Promise<Connection>, Connection)]>([:])

    func connect(to host: String, cancelledBy token: CancellationToken) -> Future<Connection> {
        let promise = Promise<Connection>()
        let connection = Connection(host: host)
        attempts.withLock { $0[host] = (promise, connection) }
        token.onCancel {
            promise.cancel()     // stop connecting...
            connection.close()   // ...or hang up
        }
        return promise.future
    }

    func accept(_ host: String) {
        let attempt = attempts.withLock { $0[host] }
        if let (promise, connection) = attempt { promise.succeed(connection) }
    }

    func connection(to host: String) -> Connection? { attempts.withLock { $0[host]?.1 } }
}

struct Settings: Sendable {
    let theme: String
}

final class SettingsStore: Sendable {
    private let count = Locked(0)

    func loadSettings() -> Future<Settings> {
        count.withLock { $0 += 1 }
        return Future(on: .global()) { Settings(theme: "dark") }
    }

    var loads: Int { count.withLock { $0 } }
}

final class ReportGenerator: Sendable {
    private let count = Locked(0)

    func generate() -> Future<String> {
        count.withLock { $0 += 1 }
        return Future(on: .global()) { "Monthly report" }
    }

    var runs: Int { count.withLock { $0 } }
}

final class Notifier: Sendable {
    let posted = Recorder<String>()

    func post(_ message: String) { posted.append(message) }
}

// MARK: - The examples

@Suite("Combinator guides")
struct CombinatorGuideTests {
    // MARK: All

    @Test func allKeepsInputOrder() async throws {
        let photos = PhotoService()
        let album = ["harbour", "lighthouse", "dunes"].map { photos.download($0) }
        let pictures = try await Future.all(album).value
        // pictures.map(\.name) == ["harbour", "lighthouse", "dunes"]: input order, not arrival order
        #expect(pictures.map(\.name) == ["harbour", "lighthouse", "dunes"])
    }

    @Test func failFastCancelsWhatOnlyTheJoinNeeded() async {
        let photos = PhotoService(missing: ["attic"], held: ["cover"])
        let cover = photos.download("cover")            // a large file, still downloading
        let page = Future.all([cover, photos.download("attic")])
        let outcome = await page.result                  // .failure(ServiceError.notFound("attic"))
        // `cover` is cancelled: the join was the only one that needed it.
        #expect(outcome.error as? ServiceError == .notFound("attic"))
        await photos.cancelled("cover")
        #expect(cover.outcome?.isCancelled == true)
    }

    @Test func collectErrorsReportsEveryFailure() async {
        let photos = PhotoService(missing: ["attic", "cellar"])
        let names = ["harbour", "attic", "dunes", "cellar"]
        let batch = Future.all(names.map { photos.download($0) }, policy: .collectErrors)
        var failedNames: [String] = []
        if case .failure(let error as JoinError) = await batch.result {
            failedNames = error.failures.map { names[$0.index] }
        }
        // failedNames == ["attic", "cellar"], in input order whatever order they failed in
        #expect(failedNames == ["attic", "cellar"])
    }

    @Test func ignoreErrorsKeepsTheSuccesses() async throws {
        let photos = PhotoService(missing: ["attic", "cellar"])
        let names = ["harbour", "attic", "dunes", "cellar"]
        let found = try await Future.all(names.map { photos.download($0) }, policy: .ignoreErrors).value
        // found.map(\.name) == ["harbour", "dunes"]
        #expect(found.map(\.name) == ["harbour", "dunes"])
    }

    @Test func allSettledGivesEveryOutcome() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let photos = PhotoService(missing: ["attic", "cellar"])
        let names = ["harbour", "attic", "dunes", "cellar"]
        let outcomes = try await Future.allSettled(names.map { photos.download($0) }).value
        for (name, outcome) in zip(names, outcomes) {
            switch outcome {
            case .success(let photo): print("\(name): \(photo.bytes) bytes")
            case .failure(let error): print("\(name) failed: \(error)")
            case .cancelled: print("\(name) was cancelled")
            }
        }
        #expect(outcomes.map(\.isSuccess) == [true, false, true, false])
        #expect(outcomes[1].error as? ServiceError == .notFound("attic"))
        #expect(printed.all == [
            "harbour: \(outcomes[0].value!.bytes) bytes", "attic failed: notFound(\"attic\")",
            "dunes: \(outcomes[2].value!.bytes) bytes", "cellar failed: notFound(\"cellar\")",
        ])
    }

    @Test func allOrNilKeepsTheLayout() async throws {
        let photos = PhotoService(missing: ["attic", "cellar"])
        let names = ["harbour", "attic", "dunes", "cellar"]
        let grid = try await Future.allOrNil(names.map { photos.download($0) }).value
        let placeholders = grid.filter { $0 == nil }.count   // 2: one per missing photo, the layout kept
        #expect(placeholders == 2)
        #expect(grid.map { $0?.name } == ["harbour", nil, "dunes", nil])
    }

    @Test func cancellingAJoinCancelsItsMembers() async {
        let photos = PhotoService(held: ["cover", "banner"])
        let gallery = Future.all([photos.download("cover"), photos.download("banner")])
        gallery.cancel()   // the user left: both downloads are cancelled, as nothing else needs them
        await photos.cancelled("cover")
        await photos.cancelled("banner")
        #expect(gallery.outcome?.isCancelled == true)
    }

    @Test func aMemberCancelledFromOutsideIsAFailureOfTheJoin() async {
        let photos = PhotoService(held: ["cover", "banner"])
        let banner = photos.download("banner")
        let header = Future.all([photos.download("cover"), banner])
        banner.cancel()   // cancelled by someone else, not by the join
        let outcome = await header.result   // .failure(FutureError.cancelledMember)
        #expect(outcome.error as? FutureError == .cancelledMember)
        await photos.cancelled("cover")
        #expect(await Future.all([Future<Photo>]()).result.value == [])
    }

    // MARK: Zip

    @Test func zipJoinsDifferentTypes() async throws {
        let photos = PhotoService()
        let accounts = AccountService()
        let card = Future.zip(accounts.user(id: 42), photos.download("avatar-42"), accounts.unreadCount(for: 42))
        let (user, avatar, unread) = try await card.value
        // user.name == "Grace", avatar.name == "avatar-42", unread == 3
        #expect(user.name == "Grace" && avatar.name == "avatar-42" && unread == 3)
    }

    @Test func zipFailsFast() async {
        let photos = PhotoService(missing: ["attic"], held: ["cover"])
        let header = Future.zip(photos.download("cover"), photos.download("attic"))
        let failure = await header.result.error   // ServiceError.notFound("attic"), at once
        // The cover download, still running and needed by nothing else, is cancelled.
        #expect(failure as? ServiceError == .notFound("attic"))
        await photos.cancelled("cover")
    }

    // MARK: Race and any

    @Test func raceTakesTheFirstOutcome() async throws {
        let europe = PhotoService()
        let america = PhotoService(held: ["harbour"])
        let fastest = Future.race([europe.download("harbour"), america.download("harbour")])
        let photo = try await fastest.value   // from Europe, which answered first
        // America's download is cancelled: the race was its only consumer.
        #expect(photo.name == "harbour")
        await america.cancelled("harbour")
    }

    @Test func raceAgainstAPlaceholder() async throws {
        let clock = ManualClock()
        let photos = PhotoService(held: ["panorama"])
        let shown = Future.race([photos.download("panorama"), Future.after(.seconds(2), value: Photo.placeholder, clock: clock)])
        clock.advance(by: .seconds(2))
        #expect(try await shown.value == .placeholder)
        await photos.cancelled("panorama")
    }

    @Test func anyTakesTheFirstSuccess() async throws {
        let offlineStore = PhotoService(missing: ["avatar-42"])
        let europe = PhotoService()
        let avatar = Future.any([offlineStore.download("avatar-42"), europe.download("avatar-42")])
        let image = try await avatar.value   // the offline store had no copy; Europe's download won
        #expect(image.name == "avatar-42")
    }

    @Test func anyFailsWithEveryFailure() async {
        let europe = PhotoService(missing: ["attic"])
        let america = PhotoService(missing: ["attic"])
        let lost = Future.any([europe.download("attic"), america.download("attic")])
        var report = ""
        if case .failure(let error as JoinError) = await lost.result {
            report = error.description   // "2 members failed: [0: notFound(\"attic\"), 1: notFound(\"attic\")]"
        }
        #expect(report == "2 members failed: [0: notFound(\"attic\"), 1: notFound(\"attic\")]")
        #expect(await Future<Photo>.race([]).result.error as? FutureError == .emptyInput)
        #expect(await Future<Photo>.any([]).result.error as? FutureError == .emptyInput)
    }

    // MARK: Ordered by completion

    @Test func slotsFillInCompletionOrder() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let photos = PhotoService(held: ["harbour", "lighthouse", "dunes"])
        let names = ["harbour", "lighthouse", "dunes"]
        let arrivals = names.map { photos.download($0) }.orderedByCompletion()
        arrivals[0].whenSuccess { photo in print("first to arrive: \(photo.name)") }
        photos.release("dunes")
        photos.release("harbour")
        photos.release("lighthouse")
        var order: [String] = []
        for arrival in arrivals { order.append(try await arrival.value.name) }
        #expect(order == ["dunes", "harbour", "lighthouse"])
        #expect(await printed.first(1) == ["first to arrive: dunes"])
    }

    @Test func outcomesAsTheyArrive() async {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let photos = PhotoService(missing: ["lighthouse"])
        let names = ["harbour", "lighthouse", "dunes"]
        var finished: [String] = []
        for await (index, outcome) in names.map({ photos.download($0) }).outcomesInCompletionOrder() {
            finished.append(names[index])
            if case .failure(let error) = outcome { print("\(names[index]) failed: \(error)") }
        }
        // The loop ends after the last download; `finished` lists them in the order they ended.
        #expect(finished.sorted() == names.sorted())
        #expect(printed.all == ["lighthouse failed: notFound(\"lighthouse\")"])

        // The order is the completion order.
        let held = PhotoService(held: Set(names))
        let updates = names.map { held.download($0) }.outcomesInCompletionOrder()
        held.release("lighthouse")
        held.release("dunes")
        held.release("harbour")
        var indices: [Int] = []
        for await (index, _) in updates { indices.append(index) }
        #expect(indices == [1, 2, 0])
    }

    // MARK: Racing operations

    @Test func racingConnections() async throws {
        let network = Network()
        let screen = CancellationSource()
        let connection = Future<Connection>.race([
            { token in network.connect(to: "eu-west", cancelledBy: token) },
            { token in network.connect(to: "us-east", cancelledBy: token) },
        ], until: screen.token)
        network.accept("us-east")
        let winner = try await connection.value
        #expect(winner.host == "us-east" && winner.isOpen)
        #expect(network.connection(to: "eu-west")?.isOpen == false, "the loser's token hung it up")
        screen.cancel()   // the screen closed: the winner's token fires and it hangs up
        #expect(!winner.isOpen)
    }

    // MARK: Serially and concurrently

    @Test func seriallyOneAfterAnother() async throws {
        let backup = PhotoService()
        let albums = ["2019", "2020", "2021"]
        let receipts = try await Future.serially(albums) { album in backup.upload(album) }.value
        // receipts in album order; each upload started only after the one before it succeeded
        #expect(receipts.map(\.album) == albums)
        #expect(backup.mostRunning == 1)
    }

    @Test func seriallyStopsAtTheFirstFailure() async {
        let backup = PhotoService(missing: ["lost"])
        let partial = Future.serially(["2019", "lost", "2021"]) { album in backup.upload(album) }
        let outcome = await partial.result   // .failure(ServiceError.notFound("lost")); "2021" never started
        #expect(outcome.error as? ServiceError == .notFound("lost"))
        #expect(backup.requests == ["2019", "lost"])
    }

    @Test func concurrentlyWithALimit() async throws {
        let photos = PhotoService()
        let names = (1...12).map { "scan-\($0)" }
        let scans = Future.concurrently(names, limit: 3, policy: .collectErrors) { name in
            photos.download(name)
        }
        let all = try await scans.value   // 12 photos in input order, never more than 3 downloading at once
        #expect(all.map(\.name) == names)
        #expect(photos.mostRunning <= 3)
    }

    // MARK: Deferred

    @Test func deferredStartsOnTheFirstDemand() async throws {
        let printed = PrintedLines()
        @Sendable func print(_ items: any Sendable...) { printed.record(items) }
        let store = SettingsStore()
        let settings = Future.deferred { store.loadSettings() }
        let loadsBefore = store.loads                     // 0: nothing has started
        settings.whenSuccess { print("theme:", $0.theme) }   // the first demand starts the load
        let theme = try await settings.map { $0.theme }.value
        let loadsAfter = store.loads                      // 1: later demands share the same load
        #expect(loadsBefore == 0 && loadsAfter == 1 && theme == "dark")
        #expect(await printed.first(1) == ["theme: dark"])
    }

    @Test func deferredCancelledBeforeItStarts() async {
        let reports = ReportGenerator()
        let report = Future.deferred { reports.generate() }
        report.cancel()   // cancelled before anything asked for it: `generate()` never runs
        #expect(await report.result.isCancelled)
        #expect(reports.runs == 0)
    }

    // MARK: Queues

    @Test func aQueueWithTwoSlots() async throws {
        let backup = PhotoService(held: ["2019", "2020", "2021"])
        let uploads = FutureQueue(maxConcurrent: 2)
        let first = uploads.add { backup.upload("2019") }
        let second = uploads.add { backup.upload("2020") }
        let third = uploads.add { backup.upload("2021") }   // waits for a free slot
        third.cancel()   // leaves the queue; "2019" and "2020" are untouched
        #expect(backup.requests == ["2019", "2020"])
        #expect(uploads.waitingCount == 0 && uploads.runningCount == 2)
        backup.release("2019")
        backup.release("2020")
        #expect(try await first.value.album == "2019")
        #expect(try await second.value.album == "2020")
        #expect(await third.result.isCancelled)
        #expect(backup.requests == ["2019", "2020"], "the cancelled upload never started")
    }

    @Test func aSerialQueueKeepsTheOrder() async throws {
        let backup = PhotoService()
        let journal = FutureQueue()   // one at a time, in the order added
        let entries = ["opened", "edited", "closed"].map { entry in journal.add { backup.upload(entry) } }
        var saved: [String] = []
        for entry in entries { saved.append(try await entry.value.album) }
        #expect(saved == ["opened", "edited", "closed"])
        #expect(backup.requests == ["opened", "edited", "closed"] && backup.mostRunning == 1)
    }

    // MARK: Caching

    @Test func aCacheSharesAndExpires() async throws {
        let clock = ManualClock()
        let photos = PhotoService(held: ["avatar-42"])
        let avatars = FutureCache<String, Photo>(clock: clock)
        let header = avatars.value(for: "avatar-42", expiresAfter: .seconds(300)) { photos.download("avatar-42") }
        let sidebar = avatars.value(for: "avatar-42") { photos.download("avatar-42") }   // shares the download
        #expect(photos.requests == ["avatar-42"])
        photos.release("avatar-42")
        #expect(try await header.value == sidebar.value)
        clock.advance(by: .seconds(300))
        let later = avatars.value(for: "avatar-42") { photos.download("avatar-42") }   // expired: a new download
        #expect(photos.requests == ["avatar-42", "avatar-42"])
        photos.release("avatar-42")
        #expect(try await later.value.name == "avatar-42")
    }

    @Test func aCachedFetchIsCancelledWhenEveryCallerCancelled() async {
        let photos = PhotoService(held: ["avatar-7"])
        let avatars = FutureCache<String, Photo>()
        let profile = avatars.value(for: "avatar-7") { photos.download("avatar-7") }
        let badge = avatars.value(for: "avatar-7") { photos.download("avatar-7") }
        profile.cancel()   // the badge still wants it: the download goes on
        badge.cancel()     // nobody does: the download is cancelled and the key forgotten
        await photos.cancelled("avatar-7")
        #expect(avatars.count == 0)
        #expect(profile.outcome?.isCancelled == true && badge.outcome?.isCancelled == true)
    }

    @Test func oneCallerLeavingDoesNotStopASharedFetch() async throws {
        let photos = PhotoService(held: ["avatar-7"])
        let avatars = FutureCache<String, Photo>()
        let profile = avatars.value(for: "avatar-7") { photos.download("avatar-7") }
        let badge = avatars.value(for: "avatar-7") { photos.download("avatar-7") }
        profile.cancel()
        #expect(!photos.isCancelled("avatar-7") && badge.isPending)
        photos.release("avatar-7")
        #expect(try await badge.value.name == "avatar-7")
        #expect(photos.requests == ["avatar-7"])
    }

    // MARK: Operations

    @Test func futuresOnAnOperationQueue() async throws {
        let backup = PhotoService()
        let transfers = OperationQueue()
        transfers.maxConcurrentOperationCount = 2
        let receipts = ["2019", "2020", "2021", "2022"].map { album in
            transfers.addFuture { backup.upload(album) }
        }
        var albums: [String] = []
        for receipt in receipts { albums.append(try await receipt.value.album) }
        #expect(albums == ["2019", "2020", "2021", "2022"])
        #expect(backup.mostRunning <= 2)
    }

    @Test func aFutureOperationWithADependency() {
        let backup = PhotoService()
        let notifier = Notifier()
        let transfers = OperationQueue()
        let archive = FutureOperation { backup.upload("archive") }
        let announce = BlockOperation { notifier.post("Archive uploaded") }
        announce.addDependency(archive)
        transfers.addOperations([archive, announce], waitUntilFinished: true)
        #expect(archive.future.outcome?.value == Receipt(album: "archive"))
        #expect(notifier.posted.all == ["Archive uploaded"])
    }

    @Test func cancellingAFutureCancelsItsOperation() {
        let backup = PhotoService()
        let transfers = OperationQueue()
        transfers.isSuspended = true
        let nightly = transfers.addFuture { backup.upload("nightly") }
        nightly.cancel()   // cancels its operation: the upload never starts
        transfers.isSuspended = false
        transfers.waitUntilAllOperationsAreFinished()
        #expect(nightly.outcome?.isCancelled == true)
        #expect(backup.requests.isEmpty)
    }

    /// Cancelling a source that every operation follows stops them all: the uploads in flight are
    /// cancelled, and no queued one starts, however the queue's threads interleave (a few rounds).
    @Test func cancellingEverythingThroughASource() async {
        for _ in 0..<50 {
            let backup = PhotoService(held: ["2019", "2020", "2021", "2022"])
            let transfers = OperationQueue()
            transfers.maxConcurrentOperationCount = 1
            let shutdown = CancellationSource()
            let uploads = ["2019", "2020", "2021", "2022"].map { album in
                transfers.addFuture { () -> Future<Receipt> in
                    guard !shutdown.token.isCancelled else { return .cancelled }
                    return backup.upload(album).cancellable(by: shutdown.token)
                }
            }
            shutdown.cancel()   // the uploads in flight are cancelled, and no other one starts
            for upload in uploads { #expect(await upload.result.isCancelled) }
            // Only the first could have started before the shutdown (the others wait for its slot).
            let requests = backup.requests
            #expect(requests == [] || requests == ["2019"])
            #expect(requests.allSatisfy { backup.isCancelled($0) })
        }
    }

    // MARK: Retry

    @Test func retryWithExponentialBackoff() async throws {
        let clock = ManualClock()
        let accounts = AccountService(flakyCalls: 2)
        let profile = Future.retry(attempts: 4, backoff: .exponential(initial: .milliseconds(200)), clock: clock) {
            accounts.profile(id: 42)
        }
        await clock.waitForSleepers()
        clock.advance(by: .milliseconds(200))   // the first retry
        await clock.waitForSleepers()
        clock.advance(by: .milliseconds(400))   // the second
        #expect(try await profile.value.name == "Grace")
        #expect(accounts.profileCalls == 3)
    }

    @Test func retryOnlyWhatIsWorthRetrying() async {
        let clock = ManualClock()
        let photos = PhotoService(missing: ["attic"])
        let photo = Future.retry(attempts: 5, backoff: .constant(.seconds(1)), clock: clock, while: { error in
            (error as? ServiceError) == .offline   // worth another try; a missing photo is not
        }) {
            photos.download("attic")
        }
        let outcome = await photo.result   // .failure(ServiceError.notFound("attic")) after one attempt
        #expect(outcome.error as? ServiceError == .notFound("attic"))
        #expect(photos.requests == ["attic"])
    }

    @Test func backoffDelays() {
        let backoff = Backoff<Duration>.exponential(initial: .milliseconds(200), factor: 2, maximum: .seconds(1))
        let waits = (1...5).map { backoff.delay($0) }   // 0.2 s, 0.4 s, 0.8 s, 1 s, 1 s
        #expect(waits == [.milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
    }

    // MARK: Time operators

    @Test func afterADelay() async throws {
        let clock = ManualClock()
        let reminder = Future.after(.seconds(30), value: "Still uploading…", clock: clock)
        #expect(reminder.isPending)
        clock.advance(by: .seconds(30))
        #expect(try await reminder.value == "Still uploading…")
    }

    @Test func timeoutWithdrawsFromTheDownload() async {
        let clock = ManualClock()
        let photos = PhotoService(held: ["panorama"])
        let preview = photos.download("panorama").timeout(after: .seconds(10), clock: clock)
        clock.advance(by: .seconds(10))
        #expect(await preview.result.error as? FutureError == .timedOut)
        await photos.cancelled("panorama")
    }

    @Test func delayedByTwoSeconds() async throws {
        let clock = ManualClock()
        let backup = PhotoService(held: ["2021"])
        let banner = backup.upload("2021").delayed(by: .seconds(2), clock: clock)   // the upload's outcome, 2 s after it ends
        backup.release("2021")
        #expect(banner.isPending)
        clock.advance(by: .seconds(2))
        #expect(try await banner.value.album == "2021")
    }
}
