extension Future {
    /// Waits for futures of any types and succeeds with a tuple of their values; the first failure
    /// (or member cancelled from outside, as ``FutureError/cancelledMember``) fails it at once, and
    /// the members still pending that only it consumes are cancelled.
    ///
    /// ```swift
    /// let (shift, vehicle) = try await Future.zip(model.shift(), model.vehicle()).value
    /// ```
    ///
    /// - Parameters:
    ///   - futures: the members, of any value types.
    ///   - file: the file of the call, for diagnostics; leave the default.
    ///   - line: the line of the call, for diagnostics; leave the default.
    /// - Returns: a future of the tuple of values, in argument order.
    public static func zip<each Element: Sendable>(
        _ futures: repeat Future<each Element>,
        file: StaticString = #fileID,
        line: UInt = #line
    ) -> Future<(repeat each Element)> where Value == (repeat each Element) {
        var members: [Future<any Sendable>] = []
        for future in repeat each futures {
            // The conversions and the join run no user code: they capture no context.
            members.append(future.map(hop: .inline, carryingContext: false) { $0 as any Sendable }.made("map", file, line))
        }
        return Future<[any Sendable]>.all(members, policy: .failFast, file: file, line: line)
            .map(hop: .inline, carryingContext: false) { values in
                let cursor = Cursor(values)
                return (repeat cursor.next(as: (each Element).self))
            }
            .made("zip", file, line)
    }

    /// ``zip(_:file:line:)`` without the call site, kept so that code naming this form still
    /// compiles; a call chooses the form above.
    @_disfavoredOverload
    public static func zip<each Element: Sendable>(
        _ futures: repeat Future<each Element>
    ) -> Future<(repeat each Element)> where Value == (repeat each Element) {
        zip(repeat each futures, file: #fileID, line: #line)
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
