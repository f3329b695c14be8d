// swift-tools-version: 6.1
// A client of the `FuturesTracing` product, written as the README says: CI resolves it and checks
// that it clones this package and swift-distributed-tracing and nothing else. SWIFT_FUTURES_URL
// points at a copy of this repository.
import PackageDescription

let package = Package(
    name: "tracing-client",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(
            url: Context.environment["SWIFT_FUTURES_URL"] ?? "https://github.com/swift-futures/swift-futures",
            from: "1.0.0", traits: ["FuturesTracing"]
        ),
    ],
    targets: [
        .executableTarget(name: "client", dependencies: [.product(name: "FuturesTracing", package: "swift-futures")]),
    ],
    swiftLanguageModes: [.v6]
)
