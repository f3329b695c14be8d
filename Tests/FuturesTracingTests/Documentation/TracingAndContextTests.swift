// The product is built with the package trait FuturesTracing: `swift test --traits FuturesTracing`.
#if FuturesTracing
import Dispatch
import Foundation
import Futures
import FuturesTracing
import Testing
import Tracing

// The examples of the "Tracing and context" article.

struct User: Sendable {
    let id: Int
}

struct Settings: Sendable {
    let userID: Int
}

func loadUser(id: Int) -> Future<User> { Future(on: .global()) { User(id: id) } }
func loadSettings(id: Int) -> Future<Settings> { Future(on: .global()) { Settings(userID: id) } }
func loadPicture(of user: User) -> Future<String> { Future(on: .global()) { "picture of \(user.id)" } }

enum RequestID {
    @TaskLocal static var current: String?
}

struct RequestIDCarrier: FutureContextCarrier {
    let id: String

    static func capture() -> RequestIDCarrier? {
        RequestID.current.map(RequestIDCarrier.init)
    }

    func restore<R>(_ body: () throws -> R) rethrows -> R {
        try RequestID.$current.withValue(id, operation: body)
    }

    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R {
        try RequestID.$current.withValue(nil, operation: body)
    }
}

@Suite struct TracingAndContextTests {
    @Test func spansAroundFutures() async throws {
        let (trace, user) = traced { _ in
            let user = Future.withSpan("load user") { span in
                span.attributes["user.id"] = 42
                return loadUser(id: 42)
            }
            return user
        }
        #expect(try await valueAfterItsCallbacks(user).id == 42)
        let span = try #require(trace.finished("load user"))
        #expect(span.parentSpanID == trace.root.spanID)
        #expect(span.attributes["user.id"] != nil)
    }

    @Test func spansNestAcrossExecutors() async throws {
        let (trace, profile) = traced { _ in
            let profile = Future.withSpan("load profile") { _ in
                loadUser(id: 42).flatMap(on: .global()) { user in
                    // Later, on a global queue: "load profile" is current, so this span is its child.
                    Future.withSpan("load picture") { _ in loadPicture(of: user) }
                }
            }
            return profile
        }
        #expect(try await valueAfterItsCallbacks(profile) == "picture of 42")
        let parent = try #require(trace.finished("load profile"))
        #expect(trace.finished("load picture")?.parentSpanID == parent.spanID)
    }

    @Test func aJoinOfTracedFutures() async throws {
        let (trace, both) = traced { _ in
            let both = Future.withSpan("load both") { _ in
                Future.zip(
                    Future.withSpan("load user") { _ in loadUser(id: 1) },
                    Future.withSpan("load settings") { _ in loadSettings(id: 1) }
                )
            }
            return both
        }
        let (user, settings) = try await valueAfterItsCallbacks(both)
        #expect(user.id == settings.userID)
        let parent = try #require(trace.finished("load both"))
        #expect(trace.finished("load user")?.parentSpanID == parent.spanID)
        #expect(trace.finished("load settings")?.parentSpanID == parent.spanID)
    }

    @Test func yourOwnValuesBesideTracing() async {
        await #expect(processExitsWith: .success) {
            FutureContext.bootstrap(FuturesTracing.ServiceContextCarrier.self, RequestIDCarrier.self)
            var context = ServiceContext.topLevel
            context[RequestKey.self] = "trace"
            let promise = Promise<Int>()
            let done = DispatchSemaphore(value: 0)
            let seen = Locked<String?>(nil)
            RequestID.$current.withValue("request 7") {
                ServiceContext.withValue(context) {
                    promise.future.whenSuccess(on: .global()) { _ in
                        seen.set("\(RequestID.current ?? "none") \(ServiceContext.current?[RequestKey.self] ?? "none")")
                        done.signal()
                    }
                }
            }
            promise.succeed(1)
            done.wait()
            if seen.get() != "request 7 trace" { exit(1) }
        }
    }
}
#endif
