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
            walk(id, depth: 1, path: [], shown: &shown, into: &lines)
        }
        // What is left waits on each other in a cycle, with nothing above it.
        for id in order where !shown.contains(id) {
            lines.append("  in a cycle:")
            walk(id, depth: 2, path: [], shown: &shown, into: &lines)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func walk(_ id: UInt64, depth: Int, path: Set<UInt64>, shown: inout Set<UInt64>, into lines: inout [String]) {
        guard let future = futures[id] else { return }
        let indent = String(repeating: "  ", count: depth)
        if path.contains(id) {
            lines.append("\(indent)#\(id) (the cycle closes here)")
            return
        }
        if shown.contains(id) {
            lines.append("\(indent)#\(id) (shown above)")
            return
        }
        shown.insert(id)
        lines.append(indent + future.description + counts(future))
        var below = path
        below.insert(id)
        for next in future.waitingOn {
            walk(next, depth: depth + 1, path: below, shown: &shown, into: &lines)
        }
    }

    private func counts(_ future: PendingFuture) -> String {
        var parts: [String] = []
        if future.consumers > 0 { parts.append("\(future.consumers) consumer\(future.consumers == 1 ? "" : "s")") }
        if future.observers > 0 { parts.append("\(future.observers) observer\(future.observers == 1 ? "" : "s")") }
        return parts.isEmpty ? "" : " [" + parts.joined(separator: ", ") + "]"
    }
}
