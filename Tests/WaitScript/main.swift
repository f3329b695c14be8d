// A command-line tool's top-level code that blocks for futures with `wait()`, as a script would.
// The tests run it in a process of its own and read what it prints: on the main thread, where
// callbacks registered with the default executor go to the main queue, which `wait()` keeps
// running while it waits.
import Dispatch
import Futures

// The first attempt of a script: the `map` step runs on the main queue.
let answer = try Future(value: 1).map { $0 + 1 }.wait()
print(answer)   // 2

// Completed later, on another thread, then a step on the main queue.
let later = try Future(on: .global()) { 20 }.map { $0 * 2 }.wait()
print(later)

// Work in a task, and a failure thrown as `value` throws it.
print(try Future { 42 }.wait())
do {
    _ = try Future<Int>(error: FutureError.timedOut).map { $0 + 1 }.wait()
} catch FutureError.timedOut {
    print("timed out")
}

// Inside a job of the main queue, the main queue cannot run again until the job returns: a wait
// for a pending future there fails at once instead of hanging.
let pending = Promise<Int>()
let insideAJob = try Future(value: 0).map { _ in
    do {
        return "waited for \(try pending.future.wait())"
    } catch FutureError.blockingWait {
        return "refused inside a job of the main queue"
    }
}.wait()
print(insideAJob)
pending.succeed(0)
