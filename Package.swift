// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "swift-futures",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .macCatalyst(.v16)],
    products: [
        .library(name: "Futures", targets: ["Futures"]),
        .library(name: "FuturesTestSupport", targets: ["FuturesTestSupport"]),
        .executable(name: "futures-demo", targets: ["futures-demo"]),
    ],
    targets: [
        // The core library: no package dependencies, only the system's Foundation and Dispatch.
        .target(name: "Futures"),
        // Deterministic executors for testing future-based code without sleeping.
        .target(name: "FuturesTestSupport", dependencies: ["Futures"]),
        // The main job: a person-and-picture loading scenario, run on the local file system.
        .executableTarget(name: "futures-demo", dependencies: ["Futures"]),
        // Heap statistics for the tests that check nothing stays allocated (malloc's own counters).
        .target(name: "CHeapStatistics", path: "Tests/CHeapStatistics"),
        // Runs one scenario in a process of its own and prints the heap each iteration kept.
        .executableTarget(name: "futures-leakcheck", dependencies: ["Futures", "CHeapStatistics"], path: "Tests/LeakCheck"),
        .testTarget(
            name: "FuturesTests",
            dependencies: ["Futures", "FuturesTestSupport", "futures-leakcheck"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
