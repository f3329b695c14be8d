import Futures

/// Task-local values and their carriers, for the allocation scenarios that install carriers (a
/// process runs one scenario, so it installs one set, with the first call of its installer). The
/// carriers capture the task-local values but restore nothing: outside a task, `withValue`
/// allocates, and the scenarios count what the library allocates.
enum ScenarioContext {
    @TaskLocal static var label: String?
    @TaskLocal static var tag: String?
}

struct LabelCarrier: FutureContextCarrier {
    let label: String
    static func capture() -> LabelCarrier? { ScenarioContext.label.map(LabelCarrier.init) }
    func restore<R>(_ body: () throws -> R) rethrows -> R { try body() }
    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R { try body() }
}

struct TagCarrier: FutureContextCarrier {
    let tag: String
    static func capture() -> TagCarrier? { ScenarioContext.tag.map(TagCarrier.init) }
    func restore<R>(_ body: () throws -> R) rethrows -> R { try body() }
    static func withoutValue<R>(_ body: () throws -> R) rethrows -> R { try body() }
}

private let oneCarrierInstalled: Void = FutureContext.bootstrap(LabelCarrier.self)
private let twoCarriersInstalled: Void = FutureContext.bootstrap(LabelCarrier.self, TagCarrier.self)

/// Runs `body` with `LabelCarrier` installed and, unless `label` is `nil`, a value current.
func withOneCarrier(_ label: String?, _ body: () -> Void) {
    _ = oneCarrierInstalled
    ScenarioContext.$label.withValue(label, operation: body)
}

/// Runs `body` with both carriers installed and a value of the first only.
func withTwoCarriersOneValue(_ body: () -> Void) {
    _ = twoCarriersInstalled
    ScenarioContext.$label.withValue("r", operation: body)
}
