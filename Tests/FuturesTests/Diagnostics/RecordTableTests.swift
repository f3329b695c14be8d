@testable import Futures
import Testing

/// The table of tracking records against a `Dictionary` doing the same insertions and removals.
@Suite struct RecordTableTests {
    /// A record for a made-up address (the table never touches the future itself).
    func record(at address: UInt, id: UInt64) -> Tracking.Record {
        Tracking.Record(
            id: id, key: key(address), type: FutureStorage<Int>.self, kind: "promise", file: #fileID, line: #line,
            made: 0, name: nil, members: [], scope: nil)
    }

    /// An identity for a made-up, 16-byte aligned address.
    func key(_ address: UInt) -> ObjectIdentifier {
        unsafeBitCast(address, to: ObjectIdentifier.self)
    }

    /// The next of a fixed sequence of pseudo-random numbers (a 64-bit xorshift).
    func next(_ state: inout UInt64) -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }

    @Test func insertionsAndRemovalsInAnyOrderFindWhatADictionaryFinds() {
        var table = RecordTable()
        var expected: [UInt: UInt64] = [:]
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        // Few distinct addresses, so that probes collide, wrap around the end and cross removals.
        let addresses = (1...600).map { UInt($0) * 16 }
        for step in 0..<8_000 {
            let address = addresses[Int(next(&state) % UInt64(addresses.count))]
            if expected[address] == nil {
                table.insert(record(at: address, id: UInt64(step)))
                expected[address] = UInt64(step)
            } else {
                #expect(table.remove(key(address))?.id == expected[address])
                expected[address] = nil
            }
            #expect(table.count == expected.count)
            let probe = addresses[Int(next(&state) % UInt64(addresses.count))]
            #expect(table[key(probe)]?.id == expected[probe])
        }
        for address in addresses {
            #expect(table[key(address)]?.id == expected[address])
        }
        var seen: [UInt64] = []
        table.forEachRecord { seen.append($0.id) }
        #expect(seen.sorted() == expected.values.sorted())
    }

    /// A table that held many records gives its slots back as they leave: emptied, it keeps the
    /// fewest slots a table has, and every record still there is found on the way down.
    @Test func theTableShrinksAsRecordsLeave() {
        var table = RecordTable()
        let addresses = (1...5_000).map { UInt($0) * 16 }
        for (index, address) in addresses.enumerated() { table.insert(record(at: address, id: UInt64(index))) }
        let full = table.capacity
        #expect(full >= 5_000 * 4 / 3)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var left = addresses
        while !left.isEmpty {
            let address = left.remove(at: Int(next(&state) % UInt64(left.count)))
            #expect(table.remove(key(address))?.id == UInt64(address / 16 - 1))
            // Never fuller than three quarters, and no emptier than an eighth once past the least.
            #expect(table.count * 4 <= table.capacity * 3)
            #expect(table.capacity == RecordTable.minimumCapacity || table.count * 8 > table.capacity)
            if left.count % 500 == 0 {
                #expect(left.allSatisfy { table[key($0)]?.id == UInt64($0 / 16 - 1) })
            }
        }
        #expect(table.count == 0)
        #expect(table.capacity == RecordTable.minimumCapacity)
        // It grows again from there.
        for address in addresses.prefix(100) { table.insert(record(at: address, id: 0)) }
        #expect(table.count == 100)
        #expect(addresses.prefix(100).allSatisfy { table[key($0)] != nil })
    }

    @Test func anUpdateChangesTheRecordInPlace() {
        var table = RecordTable()
        table.insert(record(at: 16, id: 1))
        table.insert(record(at: 32, id: 2))
        let old = table.update(key(16)) { record -> String? in
            defer { record.name = "renamed" }
            return record.name
        }
        #expect(old == .some(nil))
        #expect(table[key(16)]?.name == "renamed")
        #expect(table[key(32)]?.name == nil)
        #expect(table.update(key(48)) { _ in true } == nil)
        table.updateEach { $0.reportedStalled = true }
        #expect(table[key(16)]?.reportedStalled == true)
        #expect(table[key(32)]?.reportedStalled == true)
    }
}
