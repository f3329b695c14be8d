// swift-tools-version: 6.1
import PackageDescription

// Platforms without Apple's Combine, where FuturesCombine builds on OpenCombine instead.
let withoutCombine: [Platform] = [.linux, .android, .windows, .wasi, .openbsd]

// What a client resolves. SwiftPM resolves a dependency package's dependencies only when a target
// that one of its declared products needs uses them, under the traits the client enabled. So:
// - `Futures`, `FuturesTestSupport` and `FuturesURLSession` need no other package: a client of them
//   alone clones this package and nothing else.
// - `FuturesNIO` needs SwiftNIO, `FuturesCombine` needs OpenCombine where Combine is missing, and
//   `FuturesTracing` needs swift-distributed-tracing; each only under the trait of its name, which
//   its clients enable on their `.package` line. Without it the product's module is empty.
// - The demo (`futures-demo`) is not a declared product: SwiftPM makes one for an executable target
//   of the root package only, so `swift run futures-demo` works here and no client resolves
//   swift-argument-parser or swift-crypto. The tests' own dependencies are never a client's.
var dependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
]
// The documentation plugin, only when building the documentation (`.ci/docs`), so that nobody else
// resolves it.
if Context.environment["SWIFT_FUTURES_DOCS"] != nil {
    dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"))
}

let package = Package(
    name: "swift-futures",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .macCatalyst(.v16)],
    products: [
        .library(name: "Futures", targets: ["Futures"]),
        .library(name: "FuturesTestSupport", targets: ["FuturesTestSupport"]),
        .library(name: "FuturesNIO", targets: ["FuturesNIO"]),
        .library(name: "FuturesCombine", targets: ["FuturesCombine"]),
        .library(name: "FuturesURLSession", targets: ["FuturesURLSession"]),
        .library(name: "FuturesTracing", targets: ["FuturesTracing"]),
    ],
    traits: [
        .trait(name: "FuturesNIO", description: "The FuturesNIO bridge: futures to and from SwiftNIO's EventLoopFuture."),
        .trait(
            name: "FuturesCombine",
            description: "The FuturesCombine bridge: futures to and from Combine publishers (OpenCombine where Combine is missing)."
        ),
        .trait(
            name: "FuturesTracing",
            description: "FuturesTracing: swift-distributed-tracing's context in futures' callbacks, and spans around futures."
        ),
    ],
    dependencies: dependencies,
    targets: [
        // The core library: no package dependencies, only the system's Foundation and Dispatch.
        .target(name: "Futures", dependencies: ["CFuturesAtomicGlobals"]),
        // The core library's few atomic globals, in C11 atomics (not a product: built as part of
        // every product that needs `Futures`; `Synchronization.Atomic` is newer than the platforms
        // below on Apple systems).
        .target(name: "CFuturesAtomicGlobals"),
        // Deterministic executors for testing future-based code without sleeping.
        .target(name: "FuturesTestSupport", dependencies: ["Futures"]),
        // Futures to and from SwiftNIO's EventLoopFuture, and an executor that runs on an event loop.
        .target(
            name: "FuturesNIO",
            dependencies: ["Futures", .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["FuturesNIO"]))]
        ),
        // Futures to and from Combine publishers (OpenCombine where Combine is missing).
        .target(
            name: "FuturesCombine",
            dependencies: [
                "Futures",
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: withoutCombine, traits: ["FuturesCombine"])
                ),
            ]
        ),
        // URLSession calls as futures, with progress and cancellation.
        .target(name: "FuturesURLSession", dependencies: ["Futures"]),
        // swift-distributed-tracing's context carried into callbacks, and spans around futures.
        .target(
            name: "FuturesTracing",
            dependencies: [
                "Futures",
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["FuturesTracing"])),
            ]
        ),
        // The main job: `hash` (SHA-256 of files, concurrently, with progress, timeouts and Ctrl-C)
        // and `tour` (a person-and-picture loading scenario), on the local file system.
        .executableTarget(
            name: "futures-demo",
            dependencies: [
                "Futures",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Helpers shared by the test targets (a thread-safe recorder; the context carriers the test
        // process installs, with FuturesTracing's under its trait).
        .target(name: "FuturesTestHelpers", dependencies: ["Futures", "FuturesTracing"], path: "Tests/FuturesTestHelpers"),
        // Heap statistics for the tests that check nothing stays allocated (malloc's own counters).
        .target(name: "CHeapStatistics", path: "Tests/CHeapStatistics"),
        // Runs one scenario in a process of its own and prints the heap each iteration kept.
        .executableTarget(
            name: "futures-leakcheck",
            dependencies: [
                "Futures", "CHeapStatistics", "FuturesNIO", "FuturesCombine",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine", condition: .when(platforms: withoutCombine)),
            ],
            path: "Tests/LeakCheck"
        ),
        // Builds one structure of futures at a depth, ends it one way, and checks the outcome and the
        // heap, in a process of its own on a 512 KiB stack (the stack-safety matrix).
        .executableTarget(
            name: "futures-depthcheck",
            dependencies: ["Futures", "CHeapStatistics"],
            path: "Tests/DepthCheck"
        ),
        // A command-line tool's top-level code that waits for futures, run by the tests.
        .executableTarget(name: "futures-waitscript", dependencies: ["Futures"], path: "Tests/WaitScript"),
        // Random programs over the public API, a sequential model of the rules to check them
        // against, and a runner that executes them on several threads (the model-based tests and
        // the soak run).
        .target(name: "FuturesModel", dependencies: ["Futures"], path: "Tests/FuturesModel"),
        // Mixed random load for as long as asked: `Scripts/soak --seconds N`.
        .executableTarget(name: "futures-soak", dependencies: ["FuturesModel"], path: "Tests/Soak"),
        .testTarget(
            name: "FuturesTests",
            dependencies: [
                "Futures", "FuturesTestSupport", "FuturesTestHelpers", "FuturesModel", "futures-leakcheck",
                "futures-depthcheck", "futures-waitscript", "futures-soak",
            ]
        ),
        // Runs the built `futures-demo` as a subprocess.
        .testTarget(name: "FuturesDemoTests", dependencies: ["futures-demo"]),
        .testTarget(
            name: "FuturesNIOTests",
            dependencies: [
                "FuturesNIO",
                "FuturesTestHelpers",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "FuturesCombineTests",
            dependencies: [
                "FuturesCombine",
                "FuturesTestHelpers",
                .product(name: "OpenCombine", package: "OpenCombine", condition: .when(platforms: withoutCombine)),
            ]
        ),
        .testTarget(
            name: "FuturesTracingTests",
            dependencies: [
                "FuturesTracing",
                "FuturesTestSupport",
                "FuturesTestHelpers",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "FuturesURLSessionTests",
            dependencies: [
                "FuturesURLSession",
                "FuturesTestSupport",
                "FuturesTestHelpers",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// CI builds and tests with every warning of this package's Swift targets an error, by setting
// SWIFT_FUTURES_STRICT (for the root package only: SwiftPM refuses unsafe flags in a package that
// is a versioned dependency, and a client's own flags are its own business). A setting rather than
// `swift build -Xswiftc -warnings-as-errors`, so that the README's `swift test` reuses that build,
// and so that the warnings of other packages' code stay warnings.
if Context.environment["SWIFT_FUTURES_STRICT"] != nil {
    let cTargets: Set<String> = ["CFuturesAtomicGlobals", "CHeapStatistics"]
    for target in package.targets where !cTargets.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-warnings-as-errors"])]
    }
}
