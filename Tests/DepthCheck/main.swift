// futures-depthcheck: builds one structure of futures, nested or chained to a depth, ends it one way,
// and checks what the rules say must happen: the outermost future's outcome, whether the innermost
// producer heard its cancellation, and that the heap comes back once every reference is dropped.
// One case per process, on a 512 KiB stack, so a case that overflows the stack fails alone.
//
// Usage: futures-depthcheck STRUCTURE ENDING DEPTH   prints "ok CPU_MILLISECONDS PEAK_KIB KEPT_BYTES"
//        futures-depthcheck --list                    prints "STRUCTURE ENDING KIND" for every case
//        futures-depthcheck --sanitized               prints whether a sanitizer replaced malloc
//
// KIND is "chain" (chain-like operators, checked at 100,000 levels in release builds) or "join"
// (joins and token structures, 20,000). A wrong outcome exits 1; a crash ends the process by signal.
import CHeapStatistics
import Foundation

let structures = makeStructures()
let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "--sanitized" {
    print(heap_statistics_available() != 0 ? "no" : "yes")
    exit(0)
}
if arguments.first == "--list" {
    for structure in structures {
        for ending in structure.endings { print(structure.name, ending.rawValue, structure.kind) }
    }
    exit(0)
}
guard arguments.count == 3,
      let structure = structures.first(where: { $0.name == arguments[arguments.startIndex] }),
      let ending = Ending(rawValue: arguments[arguments.startIndex + 1]),
      structure.endings.contains(ending),
      let depth = Int(arguments[arguments.startIndex + 2]), depth >= 1
else {
    FileHandle.standardError.write(Data("usage: futures-depthcheck STRUCTURE ENDING DEPTH | --list\n".utf8))
    exit(2)
}

// A small run first, so that what the process allocates once (threads, queues, caches) is not
// counted as kept by the real one.
if let failure = run(structure, ending, depth: 4) {
    print("failed at depth 4: \(failure)")
    exit(1)
}
_ = heapKept(since: 0, slack: Int.max)
let measured = heap_statistics_available() != 0
let baseline = measured ? Int(heap_statistics_in_use()) : 0
let start = cpuMicroseconds()
if let failure = run(structure, ending, depth: depth) {
    print("failed: \(failure)")
    exit(1)
}
let elapsed = cpuMicroseconds() - start
// What the structure kept: at most a little of per-thread capacity, never a level's worth each.
let slack = 256 * 1024
let kept = measured ? heapKept(since: baseline, slack: slack) : 0
if kept > slack {
    print("failed: \(kept) bytes of heap kept after everything was dropped")
    exit(1)
}
print("ok", elapsed / 1000, peakKiB(), measured ? String(kept) : "unmeasured")
exit(0)
