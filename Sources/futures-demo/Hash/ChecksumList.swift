/// The lines of a `sha256sum` output, read for `--check` as `sha256sum -c` reads them.
///
/// A line is `<64 hex digits>  <name>` (or `<hex> *<name>`, or `<hex> <name>` as `md5 -r` writes
/// it, but not both in one list), or the tagged form `SHA256 (<name>) = <hex>`. Blank lines and
/// lines starting with `#` are skipped; one carriage return before the newline is ignored; spaces
/// and tabs may come first. A line starting with a backslash has an escaped name (`\\`, `\n`,
/// `\r`). Any other line is improperly formatted: counted, and otherwise left out.
struct ChecksumList {
    /// The entries to check, in the order of the list, with their names in `names`.
    private var entries: [(name: Name, expected: Digest)] = []
    /// How many lines were improperly formatted.
    private(set) var improperLines = 0
    private var names = NameTableBuilder()
    /// Whether the untagged lines so far had one space after the digest (`nil`: none seen yet).
    private var oneSpaceForm: Bool?
    /// Whether the list is standard input, where a file named `-` cannot be checked.
    private let listIsStandardInput: Bool

    init(_ text: [UInt8], isStandardInput: Bool) {
        listIsStandardInput = isStandardInput
        var start = 0
        while start < text.count {
            let end = text[start...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            add(line: text[start..<end])
            start = end + 1
        }
    }

    /// Whether the list holds no properly formatted line.
    var isEmpty: Bool { entries.isEmpty }

    /// The entries to check, in the order of the list.
    func inputs() -> [HashInput] {
        let table = NameTable(bytes: names.bytes)
        return entries.map { HashInput(names: table, name: $0.name, size: 0, expected: $0.expected) }
    }

    private mutating func add(line raw: ArraySlice<UInt8>) {
        var line = raw
        if line.first == UInt8(ascii: "#") { return }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        if line.isEmpty { return }
        guard let (digest, name) = parse(line), !(listIsStandardInput && name.elementsEqual([UInt8(ascii: "-")])),
            !name.contains(0)
        else {
            improperLines += 1
            return
        }
        entries.append((names.add(name), digest))
    }

    private mutating func parse(_ line: ArraySlice<UInt8>) -> (Digest, [UInt8])? {
        var i = line.startIndex
        func isBlank(_ index: Int) -> Bool {
            index < line.endIndex && (line[index] == UInt8(ascii: " ") || line[index] == UInt8(ascii: "\t"))
        }
        while isBlank(i) { i += 1 }
        var escaped = false
        if i < line.endIndex, line[i] == UInt8(ascii: "\\") {
            escaped = true
            i += 1
        }
        let tag = Array("SHA256".utf8)
        if line[i...].starts(with: tag) {
            i += tag.count
            if i < line.endIndex, line[i] == UInt8(ascii: " ") { i += 1 }
            guard i < line.endIndex, line[i] == UInt8(ascii: "(") else { return nil }
            return parseTagged(line[(i + 1)...], escaped: escaped)
        }

        // `<hex>`, a space or a tab, then the name, after a ' ' or '*' unless the list uses one space.
        guard line.endIndex - i >= 66 else { return nil }
        guard let digest = Digest(hex: line[i..<i + 64]), isBlank(i + 64) else { return nil }
        i += 65
        if line.endIndex - i == 1 || (line[i] != UInt8(ascii: " ") && line[i] != UInt8(ascii: "*")) {
            if oneSpaceForm == false { return nil }
            oneSpaceForm = true
        } else if oneSpaceForm != true {
            oneSpaceForm = false
            i += 1
        }
        let name = escaped ? Self.unescape(line[i...]) : Array(line[i...])
        return name.map { (digest, $0) }
    }

    /// `<name>) = <hex>`: the name runs to the last `)`.
    private func parseTagged(_ rest: ArraySlice<UInt8>, escaped: Bool) -> (Digest, [UInt8])? {
        guard let close = rest.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        guard let name = escaped ? Self.unescape(rest[..<close]) : Array(rest[..<close]) else { return nil }
        var i = close + 1
        func skipBlanks() {
            while i < rest.endIndex, rest[i] == UInt8(ascii: " ") || rest[i] == UInt8(ascii: "\t") { i += 1 }
        }
        skipBlanks()
        guard i < rest.endIndex, rest[i] == UInt8(ascii: "=") else { return nil }
        i += 1
        skipBlanks()
        guard let digest = Digest(hex: rest[i...]) else { return nil }
        return (digest, name)
    }

    /// `\\`, `\n` and `\r` turned back into what they stand for; `nil` for any other backslash.
    static func unescape(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var result: [UInt8] = []
        result.reserveCapacity(text.count)
        var i = text.startIndex
        while i < text.endIndex {
            guard text[i] == UInt8(ascii: "\\") else {
                result.append(text[i])
                i += 1
                continue
            }
            guard i + 1 < text.endIndex else { return nil }
            switch text[i + 1] {
            case UInt8(ascii: "\\"): result.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "n"): result.append(UInt8(ascii: "\n"))
            case UInt8(ascii: "r"): result.append(UInt8(ascii: "\r"))
            default: return nil
            }
            i += 2
        }
        return result
    }
}
