// swift-tools-version: 6.1
// Counts the instructions of a few engine paths with callgrind, for comparing two commits of the
// library: FUTURES_PATH names the checkout to build against (default: this repository).
import Foundation
import PackageDescription

let library = ProcessInfo.processInfo.environment["FUTURES_PATH"] ?? "../.."
let identity = URL(fileURLWithPath: library).standardizedFileURL.lastPathComponent

let package = Package(
    name: "instructions",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: library)],
    targets: [.executableTarget(name: "probe", dependencies: [.product(name: "Futures", package: identity)])]
)
