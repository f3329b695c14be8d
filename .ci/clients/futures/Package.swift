// swift-tools-version: 6.0
// A client that uses only the `Futures` product: CI builds it and checks that neither SwiftNIO nor
// OpenCombine (which only the bridge products need) was fetched or built for it.
import PackageDescription

let package = Package(
    name: "futures-client",
    platforms: [.macOS(.v13)],
    dependencies: [.package(name: "swift-futures", path: "../..")],
    targets: [
        .executableTarget(
            name: "futures-client",
            dependencies: [.product(name: "Futures", package: "swift-futures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
