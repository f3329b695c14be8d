import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line of the output to come: a file to hash, or a path that could not be listed.
enum HashInput: Sendable {
    /// A file: `display` is what the output line names (the PATH as given, joined with the file's
    /// path inside it), `path` where it is opened, `size` its size when listed (0 if unknown).
    case file(display: String, path: String, size: Int64)
    /// A path that could not be listed, with the reason.
    case unreadable(display: String, reason: String)

    var display: String {
        switch self {
        case .file(let display, _, _), .unreadable(let display, _): display
        }
    }
}

/// Lists what `hash` hashes, in output order.
enum FileList {
    /// Every input of `paths`: in the order given; for a directory, its regular files (symbolic
    /// links are not followed below it) in byte order of their paths.
    static func inputs(of paths: [String]) -> [HashInput] {
        paths.flatMap(inputs(of:))
    }

    static func inputs(of path: String) -> [HashInput] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return [.unreadable(display: path, reason: String(cString: strerror(errno)))]
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            // A file, or anything else named explicitly (a device, a pipe): hashed as sha256sum does.
            return [.file(display: path, path: path, size: Int64(info.st_size))]
        }
        var found: [HashInput] = []
        walk(directory: path, display: path.hasSuffix("/") ? String(path.dropLast()) : path, into: &found)
        return found.sorted { $0.display.utf8.lexicographicallyPrecedes($1.display.utf8) }
    }

    private static func walk(directory: String, display: String, into found: inout [HashInput]) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            found.append(.unreadable(display: display, reason: String(cString: strerror(errno == 0 ? EACCES : errno))))
            return
        }
        for name in names {
            let path = directory + "/" + name
            let shown = display + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else {
                found.append(.unreadable(display: shown, reason: String(cString: strerror(errno))))
                continue
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: walk(directory: path, display: shown, into: &found)
            case S_IFREG: found.append(.file(display: shown, path: path, size: Int64(info.st_size)))
            default: continue  // links, devices, sockets: `find -type f` leaves them out too
            }
        }
    }
}

/// A line as `sha256sum` prints it: a name with a backslash, a newline or a carriage return is
/// escaped, and the line then starts with a backslash. (Scalars, not characters: "\r\n" is one
/// character, and so is a backslash followed by a combining accent.)
func checksumLine(hex: String, name: String) -> String {
    let scalars = name.unicodeScalars
    guard scalars.contains(where: { $0 == "\\" || $0 == "\n" || $0 == "\r" }) else { return "\(hex)  \(name)\n" }
    var escaped = String.UnicodeScalarView()
    for scalar in scalars {
        switch scalar {
        case "\\": escaped.append(contentsOf: "\\\\".unicodeScalars)
        case "\n": escaped.append(contentsOf: "\\n".unicodeScalars)
        case "\r": escaped.append(contentsOf: "\\r".unicodeScalars)
        default: escaped.append(scalar)
        }
    }
    return "\\\(hex)  \(String(escaped))\n"
}
