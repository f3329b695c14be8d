/// The tracking records of one stripe: an open-addressed hash table keyed by each future's address,
/// probed linearly, whose removals shift the records after them back (no tombstones).
///
/// It does for ``Tracking`` what a `Dictionary` keyed by `ObjectIdentifier` would, for less: the
/// address is already a good key once mixed by one multiplication (the mixing that picks the stripe,
/// whose other bits pick the slot), so no seeded hasher runs, and a record is moved into its slot
/// instead of being copied through an optional.
///
/// Guarded by the stripe's lock like the futures of the stripe (see ``Tracking/withStripe(_:_:)``).
/// Its memory is allocated on the first insertion; it doubles when three quarters of its slots are
/// taken and halves when no more than an eighth are (down to ``minimumCapacity``), so a burst of
/// tracked futures leaves no memory behind once they are freed, and a snapshot of the table reads
/// no more empty slots than a few times the records. Resizing moves the records and frees nothing
/// but bytes (no reference is released under the lock). The stripes' tables live as long as the
/// process; one that ends (in a test) releases its records.
struct RecordTable: ~Copyable {
    /// The slots' keys: a future's address, or 0 for an empty slot.
    private var keys: UnsafeMutablePointer<UInt>?
    /// The slots' records, initialised exactly where the key is not 0.
    private var records: UnsafeMutablePointer<Tracking.Record>?
    /// The number of slots: 0, or a power of two no less than ``minimumCapacity``.
    private(set) var capacity = 0
    /// The fewest slots of a table that has any.
    static let minimumCapacity = 8
    /// How far to shift a mixed address right to get a slot: 64 less the bits of `capacity`.
    private var shift = 64
    /// The records held.
    private(set) var count = 0

    init() {}

    deinit {
        guard let keys, let records else { return }
        for index in 0..<capacity where keys[index] != 0 { (records + index).deinitialize(count: 1) }
        keys.deallocate()
        records.deallocate()
    }

    /// The slot where `key`'s probe starts: bits of the mixed address just below the eight that
    /// picked the stripe, so that the records of one stripe spread over the whole table.
    private func home(of key: UInt) -> Int {
        Int(truncatingIfNeeded: (((key >> 4) &* 0x9E37_79B9_7F4A_7C15) << 8) >> UInt(shift))
    }

    /// The slot holding `key`, if any.
    private func slot(of key: UInt) -> Int? {
        guard let keys else { return nil }
        var index = home(of: key)
        while true {
            let found = keys[index]
            if found == key { return index }
            if found == 0 { return nil }
            index = (index + 1) & (capacity - 1)
        }
    }

    /// A copy of the record of the future at `key`, if it is tracked.
    subscript(key: ObjectIdentifier) -> Tracking.Record? {
        guard let index = slot(of: UInt(bitPattern: key)) else { return nil }
        return records![index]
    }

    /// Runs `body` on the record of the future at `key`; `nil` if it has none.
    mutating func update<R>(_ key: ObjectIdentifier, _ body: (inout Tracking.Record) -> R) -> R? {
        guard let index = slot(of: UInt(bitPattern: key)) else { return nil }
        return body(&records![index])
    }

    /// Adds `record`, whose future has no record yet.
    mutating func insert(_ record: consuming Tracking.Record) {
        if (count + 1) * 4 > capacity * 3 { resize(to: max(Self.minimumCapacity, capacity * 2)) }
        let key = UInt(bitPattern: record.key)
        var index = home(of: key)
        while keys![index] != 0 { index = (index + 1) & (capacity - 1) }
        keys![index] = key
        (records! + index).initialize(to: record)
        count += 1
    }

    /// Removes and returns the record of the future at `key`, if it has one.
    mutating func remove(_ key: ObjectIdentifier) -> Tracking.Record? {
        guard var hole = slot(of: UInt(bitPattern: key)), let keys, let records else { return nil }
        let removed = (records + hole).move()
        count -= 1
        // Each record after the hole, up to the next empty slot, moves back into the hole unless
        // its probe starts after the hole (cyclically): then it would no longer be found.
        var next = hole
        while true {
            next = (next + 1) & (capacity - 1)
            let moving = keys[next]
            if moving == 0 { break }
            let start = home(of: moving)
            if (next &- start) & (capacity - 1) >= (next &- hole) & (capacity - 1) {
                keys[hole] = moving
                (records + hole).moveInitialize(from: records + next, count: 1)
                hole = next
            }
        }
        keys[hole] = 0
        if count * 8 <= capacity, capacity > Self.minimumCapacity { resize(to: capacity / 2) }
        return removed
    }

    /// Runs `body` on every record, in no particular order.
    func forEachRecord(_ body: (Tracking.Record) -> Void) {
        guard let keys, let records else { return }
        for index in 0..<capacity where keys[index] != 0 { body(records[index]) }
    }

    /// Runs `body` on every record, which it may change, in no particular order.
    mutating func updateEach(_ body: (inout Tracking.Record) -> Void) {
        guard let keys, let records else { return }
        for index in 0..<capacity where keys[index] != 0 { body(&records[index]) }
    }

    /// Moves every record to its slot in a table of `newCapacity` slots, a power of two with room
    /// for them all. Doubling leaves it three eighths full, halving a quarter full: neither is
    /// undone before as many records as a quarter of its slots have come or gone.
    private mutating func resize(to newCapacity: Int) {
        let oldKeys = keys
        let oldRecords = records
        let oldCapacity = capacity
        capacity = newCapacity
        shift = 64 - capacity.trailingZeroBitCount
        let newKeys = UnsafeMutablePointer<UInt>.allocate(capacity: capacity)
        newKeys.initialize(repeating: 0, count: capacity)
        let newRecords = UnsafeMutablePointer<Tracking.Record>.allocate(capacity: capacity)
        if let oldKeys, let oldRecords {
            for old in 0..<oldCapacity where oldKeys[old] != 0 {
                var index = home(of: oldKeys[old])
                while newKeys[index] != 0 { index = (index + 1) & (capacity - 1) }
                newKeys[index] = oldKeys[old]
                (newRecords + index).moveInitialize(from: oldRecords + old, count: 1)
            }
            oldKeys.deallocate()
            oldRecords.deallocate()
        }
        keys = newKeys
        records = newRecords
    }
}
