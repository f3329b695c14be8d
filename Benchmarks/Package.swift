// swift-tools-version: 6.1
import PackageDescription

// Malloc counting (mallocCountTotal, mallocBytesCount, memoryLeakedBytes) comes from
// package-benchmark's "MallocInterposer" trait (its malloc-interposer dependency; no jemalloc).
// Naming the trait leaves out the default "RuntimeInterposer" trait (ARC counters on Swift 6.3 Linux),
// which this suite does not use, and so its swift-runtime-interposer dependency.

let package = Package(
    name: "swift-futures-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-futures", path: "..", traits: ["FuturesNIO", "FuturesCombine", "FuturesTracing"]),
        .package(url: "https://github.com/ordo-one/package-benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/OpenCombine/OpenCombine", exact: "0.14.0"),
    ],
    targets: [
        .executableTarget(
            name: "FuturesBenchmarks",
            dependencies: [
                .product(name: "Futures", package: "swift-futures"),
                .product(name: "FuturesNIO", package: "swift-futures"),
                .product(name: "FuturesCombine", package: "swift-futures"),
                .product(name: "FuturesURLSession", package: "swift-futures"),
                .product(name: "FuturesTracing", package: "swift-futures"),
                .product(name: "OpenCombine", package: "OpenCombine", condition: .when(platforms: [.linux])),
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/FuturesBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
