import Foundation

/// A thread-safe list that callbacks append to, for the tests of every product.
public final class Recorder<Element: Sendable>: @unchecked Sendable {
    // Safety: `items` is only touched while holding `lock`.
    private let lock = NSLock()
    private var items: [Element] = []

    public init() {}

    public func append(_ item: Element) {
        lock.lock()
        items.append(item)
        lock.unlock()
    }

    public var all: [Element] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }

    public var count: Int { all.count }
}
