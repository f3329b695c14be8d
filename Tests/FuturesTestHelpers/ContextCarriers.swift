import Futures

#if FuturesTracing
import FuturesTracing
#endif

/// Task-local values that the test process's context carriers follow into futures' callbacks.
public enum TestContext {
    /// The value ``TestContextCarrier`` carries.
    @TaskLocal public static var label: String?
    /// The value ``SecondTestContextCarrier`` carries.
    @TaskLocal public static var number: Int?
}

/// Carries ``TestContext/label``.
public struct TestContextCarrier: FutureContextCarrier {
    let label: String

    public static func capture() -> TestContextCarrier? {
        TestContext.label.map(TestContextCarrier.init)
    }

    public func restore<R>(_ body: () throws -> R) rethrows -> R {
        try TestContext.$label.withValue(label, operation: body)
    }

    public static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
        try TestContext.$label.withValue(nil, operation: body)
    }
}

/// Carries ``TestContext/number``: a second carrier, so that the tests see several restored.
public struct SecondTestContextCarrier: FutureContextCarrier {
    let number: Int

    public static func capture() -> SecondTestContextCarrier? {
        TestContext.number.map(SecondTestContextCarrier.init)
    }

    public func restore<R>(_ body: () throws -> R) rethrows -> R {
        try TestContext.$number.withValue(number, operation: body)
    }

    public static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
        try TestContext.$number.withValue(nil, operation: body)
    }
}

/// Installs the test process's context carriers, the first time it is read: `FutureContext`'s
/// bootstrap may run once per process, and every test target runs in the one process, so each
/// test that needs a carrier reads this first. With the FuturesTracing trait, the carrier of
/// `ServiceContext` is installed with them.
public let contextCarriersInstalled: Void = {
    #if FuturesTracing
    FutureContext.bootstrap(
        TestContextCarrier.self, SecondTestContextCarrier.self, FuturesTracing.ServiceContextCarrier.self)
    #else
    FutureContext.bootstrap(TestContextCarrier.self, SecondTestContextCarrier.self)
    #endif
}()
