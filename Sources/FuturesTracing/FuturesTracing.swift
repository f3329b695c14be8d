// Built with the package trait FuturesTracing, which brings swift-distributed-tracing; without it
// the module is empty.
#if FuturesTracing
import Futures
import Tracing

/// swift-distributed-tracing's context in futures' callbacks.
///
/// Call ``bootstrap()`` once, at start-up: the `ServiceContext` current where a callback is
/// registered (a `map`, a `whenComplete`, a join, a timeout, ...) is then current while it runs, on
/// whatever executor runs it, so spans started there are children of the span that was current
/// where the chain was written. See <doc:TracingAndContext>.
public enum FuturesTracing {
    /// Installs ``ServiceContextCarrier`` as the process's one context carrier.
    ///
    /// Call it once, at start-up, before futures are made. It calls
    /// `FutureContext.bootstrap(_:)`, which may be called only once in a process (a second call
    /// traps): a program that carries values of its own as well installs them all in one call,
    /// `FutureContext.bootstrap(FuturesTracing.ServiceContextCarrier.self, MyCarrier.self)`.
    public static func bootstrap() {
        FutureContext.bootstrap(ServiceContextCarrier.self)
    }

    /// Carries `ServiceContext.current` from where a callback is registered to where it runs.
    public struct ServiceContextCarrier: FutureContextCarrier {
        /// The captured context.
        public let context: ServiceContext

        /// A carrier of `context`.
        ///
        /// - Parameter context: the context to restore.
        public init(_ context: ServiceContext) { self.context = context }

        /// `ServiceContext.current`, if there is one.
        public static func capture() -> ServiceContextCarrier? {
            ServiceContext.current.map(ServiceContextCarrier.init)
        }

        /// Runs `body` with ``context`` as `ServiceContext.current`.
        public func restore<R>(_ body: () throws -> R) rethrows -> R {
            try ServiceContext.withValue(context, operation: body)
        }

        /// Runs `body` with no `ServiceContext.current`: a callback registered outside any context
        /// starts root spans, not children of the span current where it runs.
        public static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
            try ServiceContext.withValue(nil, operation: body)
        }
    }
}
#endif
