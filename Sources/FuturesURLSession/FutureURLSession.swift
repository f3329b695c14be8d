import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Futures

/// A `URLSession` whose calls return futures that report progress and cancel their tasks.
///
/// ```swift
/// let session = FutureURLSession()
/// let page = session.data(for: URLRequest(url: url))
/// page.whenProgress { print("\(Int($0 * 100))%") }
/// page.whenSuccess { data, response in print(data.count, "bytes") }
/// ```
///
/// - Progress: the future's `Future.progress` is the bytes received (sent, for an upload)
///   over the bytes expected, updated as they arrive; a response of unknown length reports no
///   progress until it succeeds.
/// - Cancellation: cancelling the future (or every consumer of it withdrawing) cancels the task. A
///   task that ends with `URLError.cancelled`, however it was cancelled, ends the future
///   `.cancelled`; every other error fails it.
/// - A response with an HTTP error status (404, 500, ...) is a response, not an error: the future
///   succeeds, and the status is in the `HTTPURLResponse`.
/// - Threads: the session's delegate, which reports progress and completes the futures, runs on a
///   serial queue of its own, so transfers end even while the process keeps every thread of the
///   shared concurrent pool busy (on Linux, Swift concurrency's tasks run on that pool too).
///   Callbacks on `.immediate` run there; keep them short.
///
/// The class owns its `URLSession` and the session's delegate, because only a session's own
/// delegate hears about bytes as they arrive on every platform: on Linux a task made with a
/// completion handler reports no bytes received until it ends, and a task's own delegate is
/// ignored. Make one `FutureURLSession` per configuration and keep it; releasing it lets its tasks
/// finish and then lets the session go.
public final class FutureURLSession: Sendable {
    /// A session with the default configuration, for the whole process. Like `URLSession.shared`,
    /// it cannot be invalidated: ``invalidateAndCancel()`` and ``finishTasksAndInvalidate()`` do
    /// nothing to it.
    public static let shared = FutureURLSession(configuration: .default, isShared: true)

    /// The session that runs the tasks, kept private: only this object makes tasks on it and
    /// invalidates it, so no call can meet a session invalidated behind its back.
    private let session: URLSession
    private let delegate: SessionDelegate
    /// The serial queue the delegate's callbacks run on. An `OperationQueue` holds its underlying
    /// queue unowned, so this object keeps it.
    private let delegateCallbacks: DispatchQueue
    private let isShared: Bool

    /// Creates a session with `configuration`.
    ///
    /// - Parameter configuration: the session's configuration, copied as `URLSession` does.
    public convenience init(configuration: URLSessionConfiguration = .default) {
        self.init(configuration: configuration, isShared: false)
    }

    private init(configuration: URLSessionConfiguration, isShared: Bool) {
        let delegate = SessionDelegate()
        // The delegate's callbacks run on a serial queue of their own, not on an operation queue's
        // default, the shared concurrent pool: a serial queue is given a thread even while the
        // pool's threads are all busy. On Linux, Swift concurrency's tasks run on that pool too, so
        // in a process whose tasks keep every thread busy, no future of the session would hear of
        // progress or completion until a thread came free, and a transfer waiting on its own
        // progress (a reply sent in parts as the client reports them) would time out.
        let callbacks = DispatchQueue(label: "FutureURLSession delegate")
        let queue = OperationQueue()
        queue.name = "FutureURLSession delegate"
        queue.maxConcurrentOperationCount = 1
        queue.underlyingQueue = callbacks
        delegateCallbacks = callbacks
        self.delegate = delegate
        self.isShared = isShared
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    }

    deinit {
        // The session keeps its delegate, and so the tasks' promises, until it is invalidated.
        if delegate.invalidate() { session.finishTasksAndInvalidate() }
    }

    /// Loads `request` into memory.
    ///
    /// - Parameter request: the request to send.
    /// - Returns: a future of the body and the response; its progress follows the bytes received.
    public func data(for request: URLRequest) -> Future<(Data, URLResponse)> {
        start({ session.dataTask(with: request) }, value: { try $0.bodyAndResponse() })
    }

    /// Downloads `request` into a file.
    ///
    /// - Parameter request: the request to send.
    /// - Returns: a future of the file's location and the response. The file is in the temporary
    ///   directory and is yours: move or delete it. Its progress follows the bytes received. If the
    ///   future is cancelled, or the download fails, the file is deleted; once the future has
    ///   succeeded, the file stays until you delete it, even if nobody reads the future's value.
    public func download(for request: URLRequest) -> Future<(URL, URLResponse)> {
        start({ session.downloadTask(with: request) }, value: { try $0.fileAndResponse() })
    }

    /// Uploads `bodyData` with `request`.
    ///
    /// - Parameters:
    ///   - request: the request to send; its own body is ignored.
    ///   - bodyData: the body to upload.
    /// - Returns: a future of the response's body and the response; its progress follows the bytes
    ///   sent.
    public func upload(for request: URLRequest, from bodyData: Data) -> Future<(Data, URLResponse)> {
        start({ session.uploadTask(with: request, from: bodyData) }, value: { try $0.bodyAndResponse() })
    }

    /// Cancels every task of the session and invalidates it: their futures end `.cancelled`, and
    /// later calls fail with ``InvalidatedError``. Does nothing to ``shared``.
    public func invalidateAndCancel() {
        guard !isShared, delegate.invalidate() else { return }
        // Every future ends here, before the session cancels a single task: whatever the session
        // reports for its tasks from now on finds them untracked.
        delegate.cancelAll()
        session.invalidateAndCancel()
    }

    /// Lets the session's tasks finish, then invalidates it: their futures complete as usual, and
    /// later calls fail with ``InvalidatedError``. Does nothing to ``shared``. Releasing the object
    /// does the same.
    public func finishTasksAndInvalidate() {
        guard !isShared, delegate.invalidate() else { return }
        session.finishTasksAndInvalidate()
    }

    /// The error of a call made after ``invalidateAndCancel()`` or ``finishTasksAndInvalidate()``.
    public struct InvalidatedError: Error, Sendable, CustomStringConvertible {
        /// A one-line explanation.
        public var description: String {
            "the FutureURLSession was invalidated: make a new one for new requests"
        }
    }

    /// Makes a task, tracks it, and resumes it; its future is completed by the delegate with
    /// `value` of what the task gathered.
    private func start<Value: Sendable>(
        _ makeTask: () -> URLSessionTask,
        value: @escaping @Sendable (TaskResult) throws -> Value
    ) -> Future<Value> {
        let promise = Promise<Value>()
        let completion = TaskCompletion(
            // `true` only if the value reached the future: a file nobody received is deleted.
            complete: { result in
                switch result {
                case .success(let gathered):
                    do { return promise.succeed(try value(gathered)) } catch { _ = promise.fail(error) }
                case .failure(let error):
                    _ = promise.fail(error)
                }
                return false
            },
            progress: { promise.progress = $0 }
        )
        guard let task = delegate.track(completion, makeTask: makeTask) else {
            _ = promise.fail(InvalidatedError())
            return promise.future
        }
        let identifier = task.taskIdentifier
        promise.onCancel { [delegate] in delegate.cancelTask(identifier) }
        task.resume()
        return promise.future
    }
}

/// How the delegate completes a task's future, whatever its value type.
struct TaskCompletion: Sendable {
    /// Completes the future; `true` if it succeeded with the task's result.
    let complete: @Sendable (Result<TaskResult, any Error>) -> Bool
    /// Sets the future's progress.
    let progress: @Sendable (Double) -> Void
}

/// What a task ends with, before it is shaped into a call's value.
struct TaskResult: Sendable {
    var body: Data
    var file: URL?
    var response: URLResponse?

    func bodyAndResponse() throws -> (Data, URLResponse) {
        guard let response else { throw URLError(.badServerResponse) }
        return (body, response)
    }

    func fileAndResponse() throws -> (URL, URLResponse) {
        guard let response else { throw URLError(.badServerResponse) }
        guard let file else { throw URLError(.cannotCreateFile) }
        return (file, response)
    }
}

/// The session's delegate: routes each task's events to its promise.
///
/// A task is tracked from before it is resumed until it completes; `urlSession(_:task:didCompleteWithError:)`
/// is the one place that removes it and completes its promise. The session calls the delegate on
/// its serial delegate queue, but `track` and `invalidate` run on the caller's thread, hence the
/// lock.
final class SessionDelegate: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    // Safety: `tasks` and `invalidated` are read and written only while `lock` is held, and so are
    // the fields of each `Tracked` while it is in `tasks`; one taken out of `tasks` is used only by
    // the thread that took it. Futures are completed, their progress set and tasks cancelled after
    // the lock is released.
    private let lock = NSLock()
    private var tasks: [Int: Tracked] = [:]
    private var invalidated = false

    /// A task, how to complete its future, and what it gathered so far. A class, so that a body
    /// growing by each packet is appended to in place, never copied out of the dictionary and back.
    private final class Tracked {
        let task: URLSessionTask
        let completion: TaskCompletion
        var body = Data()
        var transferred: Int64 = 0
        var file: URL?

        init(task: URLSessionTask, completion: TaskCompletion) {
            self.task = task
            self.completion = completion
        }
    }

    /// Makes a task and tracks it, or returns `nil` once the session is invalidated.
    func track(_ completion: TaskCompletion, makeTask: () -> URLSessionTask) -> URLSessionTask? {
        lock.withLockHeld {
            guard !invalidated else { return nil }
            let task = makeTask()
            tasks[task.taskIdentifier] = Tracked(task: task, completion: completion)
            return task
        }
    }

    /// Refuses new tasks from now on; `false` if that was so already.
    func invalidate() -> Bool {
        lock.withLockHeld {
            defer { invalidated = true }
            return !invalidated
        }
    }

    /// Cancels a task whose future was cancelled, if it is still running. (Cancelling a task that
    /// has just finished can crash Foundation on Linux; asking first narrows that window.)
    func cancelTask(_ identifier: Int) {
        let task = lock.withLockHeld { tasks[identifier]?.task }
        task?.cancel()
    }

    /// Adds `count` bytes to what `task` moved so far, and returns its completion and the new total.
    ///
    /// The totals are counted here because the task's own are read when the delegate queue gets to
    /// the event, not when it happened: on Linux `countOfBytesReceived` stays 0 until the task
    /// ends, and `totalBytesWritten` can already hold the whole file at the first event.
    private func count(_ count: Int, for task: URLSessionTask, body: Data? = nil) -> (TaskCompletion, Int64)? {
        lock.withLockHeld {
            guard let tracked = tasks[task.taskIdentifier] else { return nil }
            if let body { tracked.body.append(body) }
            tracked.transferred += Int64(count)
            return (tracked.completion, tracked.transferred)
        }
    }

    private static func report(_ counted: (TaskCompletion, Int64)?, of expected: Int64) {
        guard let (completion, done) = counted, expected > 0 else { return }
        completion.progress(Double(done) / Double(expected))
    }

    private static func expectedToReceive(_ task: URLSessionTask) -> Int64 {
        task.response?.expectedContentLength ?? task.countOfBytesExpectedToReceive
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        // An upload's progress is the bytes it sent, not the bytes of its response.
        let isUpload = dataTask is URLSessionUploadTask
        let counted = count(isUpload ? 0 : data.count, for: dataTask, body: data)
        if !isUpload { Self.report(counted, of: Self.expectedToReceive(dataTask)) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64, totalBytesExpectedToSend: Int64
    ) {
        let expected = totalBytesExpectedToSend > 0 ? totalBytesExpectedToSend : task.countOfBytesExpectedToSend
        Self.report(count(Int(bytesSent), for: task), of: expected)
    }

    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        let expected = totalBytesExpectedToWrite > 0 ? totalBytesExpectedToWrite : Self.expectedToReceive(downloadTask)
        Self.report(count(Int(bytesWritten), for: downloadTask), of: expected)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        // Only for a task of ours, which is tracked until `didCompleteWithError`, after this.
        guard lock.withLockHeld({ tasks[downloadTask.taskIdentifier] != nil }) else { return }
        // The session deletes `location` when this method returns: move the file somewhere the
        // caller owns.
        let kept = FileManager.default.temporaryDirectory
            .appendingPathComponent("FutureURLSession-\(UUID().uuidString)")
            .appendingPathExtension(location.pathExtension.isEmpty ? "tmp" : location.pathExtension)
        do {
            try FileManager.default.moveItem(at: location, to: kept)
            lock.withLockHeld { tasks[downloadTask.taskIdentifier]?.file = kept }
        } catch {
            let tracked = lock.withLockHeld { tasks.removeValue(forKey: downloadTask.taskIdentifier) }
            _ = tracked?.completion.complete(.failure(error))
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let tracked = lock.withLockHeld({ tasks.removeValue(forKey: task.taskIdentifier) }) else { return }
        let result = TaskResult(body: tracked.body, file: tracked.file, response: task.response)
        let delivered = tracked.completion.complete(error.map { .failure($0) } ?? .success(result))
        if !delivered, let file = tracked.file {
            // The task failed, or its future was cancelled as it finished: nobody has the file.
            try? FileManager.default.removeItem(at: file)
        }
    }

    /// The session is invalid: on Linux it may drop its delegate before telling it that the tasks
    /// cancelled with it have completed, so whatever is still tracked ends here, cancelled.
    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?) {
        cancelAll()
    }

    /// Ends the future of every task still tracked `.cancelled`, and stops tracking them. Called
    /// just before the session cancels them: on Linux, once, neither the completions of 14 of 20
    /// cancelled tasks nor the session's invalidation ever reached this delegate, and in another
    /// run 14 of 20 futures ended other than cancelled.
    func cancelAll() {
        let orphans = lock.withLockHeld {
            defer { tasks.removeAll() }
            return Array(tasks.values)
        }
        for tracked in orphans {
            if let file = tracked.file { try? FileManager.default.removeItem(at: file) }
            _ = tracked.completion.complete(.failure(URLError(.cancelled)))
        }
    }
}
