// Mixed random load for as long as asked: the model-based tests' programs, generated without end
// on every core, each checked against the model. Prints throughput and resident memory every
// 10 s; fails on the first broken rule, or when memory grows past the bound.
//
//     futures-soak --seconds 60 [--threads N] [--max-growth-mb 256] [--length 60]
//     futures-soak --census 1000 [--length 60]    what that many programs build, run nothing
//     futures-soak --check 1,2,3 [--length 30] [--together]
//                                                  those seeds' programs, one after another (or all
//                                                  at once), each failure shrunk; exit status 1 if
//                                                  any failed
import Foundation
import FuturesModel

struct Options {
    var seconds = 60.0
    var threads = ProcessInfo.processInfo.activeProcessorCount
    var maxGrowthMB = 256.0
    var length = 60
    var census: Int?
    var check: [UInt64]?
    var together = false

    init(_ arguments: [String]) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument == "--help" || argument == "-h" {
                report(Self.synopsis)
                exit(0)
            }
            if argument == "--together" {
                together = true
                continue
            }
            guard let value = iterator.next() else { Self.usage("\(argument) needs a value") }
            switch argument {
            case "--seconds": seconds = Self.parse(value, as: argument)
            case "--threads": threads = Self.parse(value, as: argument)
            case "--max-growth-mb": maxGrowthMB = Self.parse(value, as: argument)
            case "--length": length = Self.parse(value, as: argument)
            case "--census": census = Self.parse(value, as: argument)
            case "--check": check = value.split(separator: ",").map { Self.parse(String($0), as: argument) }
            default: Self.usage("unknown option \(argument)")
            }
        }
        guard seconds > 0, threads > 0, maxGrowthMB > 0, length > 0, census.map({ $0 > 0 }) ?? true,
              check.map({ !$0.isEmpty }) ?? true,
              census == nil || check == nil
        else { Self.usage("every value must be positive, and --census and --check do not go together") }
    }

    static func parse<Number: LosslessStringConvertible>(_ value: String, as option: String) -> Number {
        guard let number = Number(value) else { usage("\(option) takes a number, not \(value)") }
        return number
    }

    static let synopsis =
        """
        usage: futures-soak [--seconds S] [--threads N] [--max-growth-mb M] [--length STEPS]
               futures-soak --census PROGRAMS [--length STEPS]
               futures-soak --check SEED[,SEED...] [--length STEPS] [--together]
        """

    static func usage(_ problem: String) -> Never {
        FileHandle.standardError.write(Data("futures-soak: \(problem)\n\(synopsis)\n".utf8))
        exit(2)
    }
}

/// Resident memory in MiB, from /proc (0 where there is none).
func residentMB() -> Double {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
          let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
    else { return 0 }
    return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
}

/// Writes one line to stdout at once (not buffered, also into a pipe or a CI log: a run that is
/// killed still shows its reports).
func report(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let options = Options(Array(CommandLine.arguments.dropFirst()))

// How many programs in 1,000 build each feature, from the first seeds the tests use.
if let count = options.census {
    var tally: [String: Int] = [:]
    for seed in 0..<UInt64(count) {
        for feature in Program.random(seed: seed &* 0x9E37_79B9 &+ 1, length: options.length).features {
            tally[feature, default: 0] += 1
        }
    }
    report("census of \(count) programs of \(options.length) steps (per 1,000 programs):")
    for (feature, programs) in tally.sorted(by: { $0.key < $1.key }) {
        report(String(format: "  %6.1f  ", Double(programs) * 1_000 / Double(count)) + feature)
    }
    exit(0)
}
// The model-based tests run their seeds here, in a process of their own: the library's timers on
// custom clocks sleep in tasks, and in the test process other tests' synchronous bodies can hold
// every thread of Swift concurrency's pool for minutes.
if let seeds = options.check {
    let (length, together) = (options.length, options.together)
    let failures = Locked<[String]>([])
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
        // Each seed is named as it starts and each failure printed as it is found: a run killed
        // for taking too long still shows which program it was running.
        @Sendable func check(_ seed: UInt64) async -> Bool {
            report("checking seed \(seed)")
            guard let failure = await ModelCheck.check(seed: seed, length: length) else { return true }
            report(failure)
            failures.withLock { $0.append(failure) }
            return false
        }
        if together {
            await withTaskGroup(of: Bool.self) { group in
                for seed in seeds { group.addTask { await check(seed) } }
                await group.waitForAll()
            }
        } else {
            for seed in seeds {
                guard await check(seed) else { break }
            }
        }
        finished.signal()
    }
    finished.wait()
    let found = failures.withLock { $0 }
    if found.isEmpty { report("checked \(seeds.count) programs of \(length) steps, every one as the model says") }
    exit(found.isEmpty ? 0 : 1)
}

let counters = Locked((programs: 0, steps: 0))
/// The program each worker runs now, named by the number that generated it (to replay a stuck one);
/// `nil` once the worker has stopped.
let running = Locked<[Int: UInt64]>([:])
let stop = Locked(false)
let failure = Locked<String?>(nil)
let start = Date()
let base = UInt64(start.timeIntervalSince1970 * 1_000)
report("soak: \(options.threads) threads for \(options.seconds) s, programs of \(options.length) steps, seeds from \(base)")

var threads: [Thread] = []
for worker in 0..<options.threads {
    let thread = Thread {
        var seed = base &+ UInt64(worker) << 40
        defer { running.withLock { $0[worker] = nil } }
        while !stop.withLock({ $0 }) {
            seed &+= 1
            running.withLock { [seed] in $0[worker] = seed }
            let program = Program.random(seed: seed, length: options.length)
            if let problem = ModelRun(program).run() {
                failure.withLock { $0 = $0 ?? "seed \(seed) (length \(options.length)): \(problem)\n\(program)" }
                stop.withLock { $0 = true }
                return
            }
            counters.withLock {
                $0.programs += 1
                $0.steps += program.steps.count
            }
        }
    }
    thread.stackSize = 4 << 20
    running.withLock { $0[worker] = base }
    thread.start()
    threads.append(thread)
}

var baseline: Double?
var last = (time: start, programs: 0, steps: 0)
var exitCode: Int32 = 0
while true {
    let deadline = min(last.time.addingTimeInterval(10), start.addingTimeInterval(options.seconds))
    while Date() < deadline, !stop.withLock({ $0 }) { Thread.sleep(forTimeInterval: 0.1) }
    let now = Date()
    let (programs, steps) = counters.withLock { ($0.programs, $0.steps) }
    let elapsed = now.timeIntervalSince(last.time)
    let rss = residentMB()
    report(String(
        format: "%6.0f s  %7.0f programs/s  %8.0f steps/s  resident %7.1f MiB  (%d programs in all)",
        now.timeIntervalSince(start), Double(programs - last.programs) / elapsed,
        Double(steps - last.steps) / elapsed, rss, programs
    ))
    last = (now, programs, steps)
    // The first report is the baseline: the runtime, the thread pools and the caches are warm.
    if let baseline, rss - baseline > options.maxGrowthMB {
        report("soak: FAILED: resident memory grew by \(Int(rss - baseline)) MiB, more than \(Int(options.maxGrowthMB))")
        exitCode = 1
        break
    }
    if baseline == nil { baseline = rss }
    if stop.withLock({ $0 }) || now.timeIntervalSince(start) >= options.seconds { break }
}
stop.withLock { $0 = true }
// Every worker finishes the program it is running: one that does not within the time a program
// may take (a minute to settle each step, at worst) is stuck, which is a failure too.
let joinDeadline = Date().addingTimeInterval(180)
while !running.withLock({ $0.isEmpty }), Date() < joinDeadline { Thread.sleep(forTimeInterval: 0.1) }
let stuck = running.withLock { $0.values.sorted() }
if !stuck.isEmpty, failure.withLock({ $0 }) == nil {
    failure.withLock { $0 = "programs still running 180 s after the end, seeds \(stuck) (length \(options.length))" }
}
if let failure = failure.withLock({ $0 }) {
    report("soak: FAILED: \(failure)")
    exitCode = 1
}
if exitCode == 0 { report("soak: passed, \(last.programs) programs, \(last.steps) steps, every one as the model says") }
exit(exitCode)
