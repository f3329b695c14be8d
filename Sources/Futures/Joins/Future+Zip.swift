extension Future {
    /// Waits for futures of any types and succeeds with a tuple of their values; the first failure
    /// (or member cancelled from outside, as ``FutureError/cancelledMember``) fails it at once, and
    /// the members still pending that only it consumes are cancelled.
    ///
    /// ```swift
    /// let (shift, vehicle) = try await Future.zip(model.shift(), model.vehicle()).value
    /// ```
    ///
    /// - Parameter futures: the members, of any value types.
    /// - Returns: a future of the tuple of values, in argument order.
    public static func zip<each Element: Sendable>(
        _ futures: repeat Future<each Element>
    ) -> Future<(repeat each Element)> where Value == (repeat each Element) {
        var members: [Future<any Sendable>] = []
        for future in repeat each futures {
            members.append(future.map(on: .immediate) { $0 as any Sendable })
        }
        return Future<[any Sendable]>.all(members, policy: .failFast).map(on: .immediate) { values in
            let cursor = Cursor(values)
            return (repeat cursor.next(as: (each Element).self))
        }
    }
}

/// Hands out a join's type-erased values, in order, as the types of a parameter pack.
private final class Cursor {
    private let values: [any Sendable]
    private var index = 0

    init(_ values: [any Sendable]) { self.values = values }

    func next<Element>(as type: Element.Type) -> Element {
        defer { index += 1 }
        return values[index] as! Element
    }
}
