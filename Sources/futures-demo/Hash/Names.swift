#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// File names as the file system holds them: bytes, not necessarily valid UTF-8.
///
/// Every name is stored once, end to end with the others in one array, and followed by a NUL, so
/// it can be handed to `open` as it is. The table is built once and then only read, from any
/// thread: one for a `--check` list, one per file found by a walk.
final class NameTable: Sendable {
    let bytes: [UInt8]

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The bytes of `name` (without its NUL).
    func withName<Result>(_ name: Name, _ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        try bytes.withUnsafeBufferPointer { all in
            try body(UnsafeBufferPointer(rebasing: all[name.start..<name.start + name.count]))
        }
    }

    /// `name` as a C string for the system's calls.
    func withCString<Result>(_ name: Name, _ body: (UnsafePointer<CChar>) throws -> Result) rethrows -> Result {
        try bytes.withUnsafeBufferPointer { all in
            try UnsafeRawPointer(all.baseAddress! + name.start).withMemoryRebound(to: CChar.self, capacity: name.count + 1) {
                try body($0)
            }
        }
    }

    /// The name, with any bytes that are not UTF-8 replaced (for messages only).
    func string(_ name: Name) -> String {
        withName(name) { String(decoding: $0, as: UTF8.self) }
    }
}

/// Where one name is in a ``NameTable``.
struct Name: Sendable {
    var start: Int
    var count: Int
}

/// Appends names to a byte array, each followed by a NUL.
struct NameTableBuilder {
    var bytes: [UInt8] = []

    mutating func add(_ name: some Collection<UInt8>) -> Name {
        let start = bytes.count
        bytes.append(contentsOf: name)
        bytes.append(0)
        return Name(start: start, count: bytes.count - 1 - start)
    }
}

// MARK: - Output, as sha256sum writes it

/// Lowercase hexadecimal digits, two per byte.
private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// A SHA-256 digest: 32 bytes, compared and printed without any allocation.
struct Digest: Sendable, Equatable {
    var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    init(_ raw: UnsafeRawBufferPointer) {
        withUnsafeMutableBytes(of: &bytes) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.prefix(32))) }
    }

    /// Parses 64 hexadecimal digits (either case); `nil` if `text` is anything else.
    init?(hex text: some Collection<UInt8>) {
        guard text.count == 64 else { return nil }
        var failed = false
        withUnsafeMutableBytes(of: &bytes) { out in
            var index = text.startIndex
            for position in 0..<32 {
                guard let high = Self.value(ofHexDigit: text[index]),
                    let low = Self.value(ofHexDigit: text[text.index(after: index)])
                else {
                    failed = true
                    return
                }
                out[position] = high << 4 | low
                index = text.index(index, offsetBy: 2)
            }
        }
        if failed { return nil }
    }

    private static func value(ofHexDigit digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    static func == (left: Digest, right: Digest) -> Bool {
        left.bytes.0 == right.bytes.0 && left.bytes.1 == right.bytes.1 && left.bytes.2 == right.bytes.2
            && left.bytes.3 == right.bytes.3
    }

    /// Appends the 64 lowercase hexadecimal digits.
    func appendHex(to output: inout [UInt8]) {
        withUnsafeBytes(of: bytes) { raw in
            for byte in raw {
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            }
        }
    }
}

/// Appends `name`, with a backslash, a newline and a carriage return written as `\\`, `\n`, `\r`.
private func appendEscaped(_ name: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
    for byte in name {
        switch byte {
        case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case UInt8(ascii: "\n"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case UInt8(ascii: "\r"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        default: output.append(byte)
        }
    }
}

/// Appends a checksum line as `sha256sum` prints it: `<hex>  <name>\n`. A name with a backslash, a
/// newline or a carriage return is escaped, and the line then starts with a backslash. Any other
/// byte, valid UTF-8 or not, is written as it is.
func appendChecksumLine(digest: Digest, name: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
    let escapes = name.contains { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }
    if escapes { output.append(UInt8(ascii: "\\")) }
    digest.appendHex(to: &output)
    output.append(UInt8(ascii: " "))
    output.append(UInt8(ascii: " "))
    if escapes { appendEscaped(name, to: &output) } else { output.append(contentsOf: name) }
    output.append(UInt8(ascii: "\n"))
}

/// Appends a verdict line as `sha256sum -c` prints it: `<name>: <verdict>\n`. Only a name with a
/// newline is escaped (then its backslashes and carriage returns too, and the line starts with a
/// backslash).
func appendVerdictLine(name: UnsafeBufferPointer<UInt8>, verdict: String, to output: inout [UInt8]) {
    if name.contains(UInt8(ascii: "\n")) {
        output.append(UInt8(ascii: "\\"))
        appendEscaped(name, to: &output)
    } else {
        output.append(contentsOf: name)
    }
    output.append(UInt8(ascii: ":"))
    output.append(UInt8(ascii: " "))
    output.append(contentsOf: verdict.utf8)
    output.append(UInt8(ascii: "\n"))
}

// MARK: - Names in messages

/// `name` quoted for a message on standard error as `sha256sum` quotes it: as it is when a shell
/// would read it back unchanged (`data/one`), else between single quotes (`'A space'`), in double
/// quotes when it holds a single quote but nothing a shell expands (`"it's"`), and with bytes that
/// are not printable written as `$'\n'` or `$'\377'` between the quoted parts.
func quotedForMessage(_ name: some Collection<UInt8>) -> [UInt8] {
    let bytes = Array(name)
    if bytes.isEmpty { return Array("''".utf8) }

    // One pass to see what the name needs.
    var needsQuotes = false
    var needsEscapes = false
    var hasSingleQuote = false
    var allDoubleQuotable = true
    var index = 0
    while index < bytes.count {
        let byte = bytes[index]
        if byte >= 0x80 {
            let length = printableUTF8Length(bytes, at: index)
            if length == 0 {
                needsQuotes = true
                needsEscapes = true
                allDoubleQuotable = false
                index += 1
            } else {
                index += length
            }
            continue
        }
        switch byte {
        case 0..<0x20, 0x7F:
            needsQuotes = true
            needsEscapes = true
            allDoubleQuotable = false
        case UInt8(ascii: "'"):
            needsQuotes = true
            hasSingleQuote = true
        case UInt8(ascii: " "):
            needsQuotes = true
        case UInt8(ascii: "#"), UInt8(ascii: "~"):
            if index == 0 { needsQuotes = true } else { allDoubleQuotable = false }
        case UInt8(ascii: "{"), UInt8(ascii: "}"):
            if bytes.count == 1 { needsQuotes = true } else { allDoubleQuotable = false }
        case UInt8(ascii: "!"), UInt8(ascii: "\""), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: ";"), UInt8(ascii: "<"), UInt8(ascii: "="),
            UInt8(ascii: ">"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "\\"), UInt8(ascii: "^"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: ":"):
            needsQuotes = true
            allDoubleQuotable = false
        default:
            break  // letters, digits, and % + , - . / @ ] _
        }
        index += 1
    }
    guard needsQuotes else { return bytes }
    if hasSingleQuote, !needsEscapes, allDoubleQuotable {
        return [UInt8(ascii: "\"")] + bytes + [UInt8(ascii: "\"")]
    }

    // Single quotes, leaving them for `'\''` and for `$'...'` runs of escaped bytes.
    var output: [UInt8] = [UInt8(ascii: "'")]
    var inEscapes = false
    index = 0
    while index < bytes.count {
        let byte = bytes[index]
        let length = byte >= 0x80 ? printableUTF8Length(bytes, at: index) : (byte < 0x20 || byte == 0x7F ? 0 : 1)
        if length == 0 {
            if !inEscapes {
                output.append(contentsOf: "'$'".utf8)
                inEscapes = true
            }
            output.append(contentsOf: escape(byte))
            index += 1
            continue
        }
        if inEscapes {
            output.append(contentsOf: "''".utf8)
            inEscapes = false
        }
        if byte == UInt8(ascii: "'") {
            output.append(contentsOf: "'\\''".utf8)
        } else {
            output.append(contentsOf: bytes[index..<index + length])
        }
        index += length
    }
    output.append(UInt8(ascii: "'"))
    return output
}

/// How a byte that is not printable is written inside `$'...'`.
private func escape(_ byte: UInt8) -> [UInt8] {
    switch byte {
    case 0x07: return Array("\\a".utf8)
    case 0x08: return Array("\\b".utf8)
    case 0x09: return Array("\\t".utf8)
    case 0x0A: return Array("\\n".utf8)
    case 0x0B: return Array("\\v".utf8)
    case 0x0C: return Array("\\f".utf8)
    case 0x0D: return Array("\\r".utf8)
    default:
        return [UInt8(ascii: "\\"), UInt8(ascii: "0") + (byte >> 6), UInt8(ascii: "0") + (byte >> 3 & 7), UInt8(ascii: "0") + (byte & 7)]
    }
}

/// The length of the printable UTF-8 character that starts at `index`, or 0 if the bytes there are
/// not valid UTF-8 or encode a control character (U+0080 to U+009F).
private func printableUTF8Length(_ bytes: [UInt8], at index: Int) -> Int {
    let first = bytes[index]
    let length: Int
    var scalar: UInt32
    switch first {
    case 0xC2...0xDF: (length, scalar) = (2, UInt32(first & 0x1F))
    case 0xE0...0xEF: (length, scalar) = (3, UInt32(first & 0x0F))
    case 0xF0...0xF4: (length, scalar) = (4, UInt32(first & 0x07))
    default: return 0
    }
    guard index + length <= bytes.count else { return 0 }
    for offset in 1..<length {
        let next = bytes[index + offset]
        guard next & 0xC0 == 0x80 else { return 0 }
        scalar = scalar << 6 | UInt32(next & 0x3F)
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    let smallest: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
    guard scalar >= smallest, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { return 0 }
    return scalar < 0xA0 ? 0 : length
}
