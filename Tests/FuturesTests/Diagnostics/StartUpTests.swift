#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import Testing
@testable import Futures

/// What is decided once per process: whether the environment turns tracking on, and the one
/// reporter. Each exit test's body runs in a fresh process of its own, where no future was made
/// before it and no reporter installed.
@Suite struct StartUpTests {
    @Test func onlyTheValueOneTurnsTrackingOn() {
        #expect(Tracking.enables(diagnosticsVariable: "1"))
        #expect(!Tracking.enables(diagnosticsVariable: nil))
        #expect(!Tracking.enables(diagnosticsVariable: "0"))
        #expect(!Tracking.enables(diagnosticsVariable: ""))
        #expect(!Tracking.enables(diagnosticsVariable: "yes"))
    }

    @Test func theVariableSetBeforeTheFirstFutureTurnsTrackingOn() async {
        await #expect(processExitsWith: .success) {
            setenv("SWIFT_FUTURES_DIAGNOSTICS", "1", 1)
            let promise = Promise<Int>()
            // Tracked since the first future: the promise is in the table, with its call site.
            let pending = FutureDiagnostics.pendingFutures()
            guard pending.count == 1, pending[0].kind == "promise", pending[0].file == #fileID else { exit(2) }
            guard FutureDiagnostics.isTracking else { exit(3) }
            promise.succeed(1)
        }
    }

    @Test func withoutTheVariableNothingIsTracked() async {
        await #expect(processExitsWith: .success) {
            setenv("SWIFT_FUTURES_DIAGNOSTICS", "0", 1)
            let promise = Promise<Int>()
            guard FutureDiagnostics.pendingFutures().isEmpty, !FutureDiagnostics.isTracking else { exit(2) }
            promise.succeed(1)
        }
    }

    @Test func theVariableIsReadOnceByTheFirstFutureMade() async {
        await #expect(processExitsWith: .success) {
            unsetenv("SWIFT_FUTURES_DIAGNOSTICS")
            let first = Promise<Int>()
            // Set too late: the first future decided.
            setenv("SWIFT_FUTURES_DIAGNOSTICS", "1", 1)
            let second = Promise<Int>()
            guard FutureDiagnostics.pendingFutures().isEmpty, !FutureDiagnostics.isTracking else { exit(2) }
            first.succeed(1)
            second.succeed(2)
        }
    }

    @Test func stoppingTrackingBeforeTheFirstFutureOverridesTheVariable() async {
        await #expect(processExitsWith: .success) {
            setenv("SWIFT_FUTURES_DIAGNOSTICS", "1", 1)
            FutureDiagnostics.stopTracking()
            let promise = Promise<Int>()
            guard FutureDiagnostics.pendingFutures().isEmpty else { exit(2) }
            promise.succeed(1)
        }
    }

    @Test func aSecondBootstrapTraps() async {
        await #expect(processExitsWith: .failure) {
            FutureDiagnostics.bootstrap { _ in }
            FutureDiagnostics.bootstrap { _ in }
        }
    }

    @Test func oneBootstrapDoesNotTrap() async {
        await #expect(processExitsWith: .success) {
            FutureDiagnostics.bootstrap { _ in }
        }
    }
}
