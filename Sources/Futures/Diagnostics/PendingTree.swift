/// The pending futures as a tree, from those nobody waits on down to what they wait on.
struct PendingTree {
    let futures: [UInt64: PendingFuture]
    let order: [UInt64]

    init(_ pending: [PendingFuture]) {
        futures = Dictionary(uniqueKeysWithValues: pending.map { ($0.id, $0) })
        order = pending.map(\.id)
    }

    func render() -> String {
        guard !order.isEmpty else { return "no pending futures\n" }
        let waitedOn = Set(futures.values.flatMap(\.waitingOn))
        var lines: [String] = ["\(order.count) pending future\(order.count == 1 ? "" : "s"):"]
        var shown: Set<UInt64> = []
        for id in order where !waitedOn.contains(id) {
            walk(id, depth: 1, shown: &shown, into: &lines)
        }
        // What is left waits on each other in a cycle, with nothing above it.
        for id in order where !shown.contains(id) {
            lines.append("  in a cycle:")
            walk(id, depth: 2, shown: &shown, into: &lines)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Prints `root` and what it waits on, depth first, with an explicit stack: a chain of a
    /// million pending futures is a million levels deep. Past `deepest` levels the indentation stops
    /// growing and each line says its depth instead.
    private func walk(_ root: UInt64, depth: Int, shown: inout Set<UInt64>, into lines: inout [String]) {
        enum Step {
            case enter(UInt64, depth: Int)
            case leave(UInt64)
        }
        let deepest = 32
        var path: Set<UInt64> = []  // the futures from the root down to the one being printed
        var stack: [Step] = [.enter(root, depth: depth)]
        while let step = stack.popLast() {
            switch step {
            case .leave(let id):
                path.remove(id)
            case .enter(let id, let depth):
                guard let future = futures[id] else { continue }
                var indent = String(repeating: "  ", count: min(depth, deepest))
                if depth > deepest { indent += "(depth \(depth)) " }
                if path.contains(id) {
                    lines.append("\(indent)#\(id) (the cycle closes here)")
                    continue
                }
                if shown.contains(id) {
                    lines.append("\(indent)#\(id) (shown above)")
                    continue
                }
                shown.insert(id)
                lines.append(indent + future.description + counts(future))
                path.insert(id)
                stack.append(.leave(id))
                for next in future.waitingOn.reversed() { stack.append(.enter(next, depth: depth + 1)) }
            }
        }
    }

    private func counts(_ future: PendingFuture) -> String {
        var parts: [String] = []
        if future.consumers > 0 { parts.append("\(future.consumers) consumer\(future.consumers == 1 ? "" : "s")") }
        if future.observers > 0 { parts.append("\(future.observers) observer\(future.observers == 1 ? "" : "s")") }
        return parts.isEmpty ? "" : " [" + parts.joined(separator: ", ") + "]"
    }
}
