// Type-checked in CI against the strict build (`swiftc -typecheck`): `Future.value` and
// `Future.result` are `nonisolated(nonsending)`, so that awaiting them keeps the caller's isolation.
// swift-api-digester reports that attribute as a change of the 1.0.0 API
// (.ci/api-baseline/1.0.0/allowed-changes.txt); these uses, which compiled against 1.0.0, show that
// no source breaks: from the main actor, an actor, plain and `@concurrent` functions, a closure, and
// a protocol of the user's that `Future` conforms to.
import Futures

protocol AsyncValue {
    associatedtype V
    var value: V { get async throws }
    var result: Outcome<V> { get async }
}
extension Future: AsyncValue {}

@MainActor func onMain(_ f: Future<Int>) async throws -> Int { try await f.value }
actor A { func get(_ f: Future<Int>) async -> Outcome<Int> { await f.result } }
nonisolated func plain(_ f: Future<Int>) async throws -> Int { try await f.value }
@concurrent func concurrent(_ f: Future<Int>) async throws -> Int { try await f.value }
func generic<T: AsyncValue>(_ t: T) async throws -> T.V { try await t.value }
let getter: (Future<Int>) async throws -> Int = { try await $0.value }
