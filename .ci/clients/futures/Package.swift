// swift-tools-version: 6.0
// A client of the `Futures` product alone, written as the README says (a plain `.package(url:from:)`
// line, no traits): CI resolves it and checks that it clones this package and nothing else, then
// builds and runs it. SWIFT_FUTURES_URL points at a copy of this repository.
import PackageDescription

let package = Package(
    name: "futures-client",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(
            url: Context.environment["SWIFT_FUTURES_URL"] ?? "https://github.com/swift-futures/swift-futures",
            from: "1.0.0"
        ),
    ],
    targets: [
        .executableTarget(
            name: "futures-client",
            dependencies: [.product(name: "Futures", package: "swift-futures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
