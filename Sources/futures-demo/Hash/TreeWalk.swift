#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line of the output to come: a file to hash (and, with `--check`, the digest it should have),
/// or a path that could not be listed.
struct HashInput: Sendable {
    /// The table that holds `name`.
    var names: NameTable
    /// What the output line names; also where the file is opened.
    var name: Name
    /// The size when listed, for the progress bar (0 if not known or not asked for).
    var size: Int64
    /// The `errno` that stopped listing it, or 0.
    var listError: Int32 = 0
    /// With `--check`: the digest the file should have.
    var expected: Digest? = nil
}

/// What `hash` hashes, in output order, found as it is asked for: a depth-first walk that holds
/// only the listings of the directories on the current path, so its memory grows with the depth
/// of the tree and the size of its directories, never with the number of files.
///
/// `LC_ALL=C sort` orders whole paths byte by byte. Two paths under one directory first differ in
/// the entries of that directory they go through, and no name holds a `/`, so sorting each
/// directory's entries by their name, with a `/` after the name of a subdirectory, gives that same
/// order: `a.c` (`.` is 0x2E) comes before everything under `a/` (`/` is 0x2F), and `a/x` before
/// `a0`. Directories are read with `opendir`/`readdir`, and an entry is looked at with `fstatat`
/// only when the directory does not say its type (or its size is wanted for the progress bar).
/// Symbolic links are followed for a path given, never below it.
struct TreeWalk {
    /// The name of the last item `next()` returned.
    private(set) var name: [UInt8] = []
    private let roots: [[UInt8]]
    private var nextRoot = 0
    private let wantsSizes: Bool
    /// The directories being walked, outermost first.
    private var stack: [DirectoryListing] = []
    /// The path of the innermost directory being walked, with a `/` after it, and then the name of
    /// the entry being looked at.
    private var path: [UInt8] = []

    /// A file to hash, or a path that could not be listed (`error` is then its `errno`).
    struct Item {
        var size: Int64
        var error: Int32
    }

    /// Walks `roots` in the order given: a file as it is; for a directory, its regular files in
    /// byte order of their paths, as `find DIR -type f | LC_ALL=C sort` lists them.
    init(roots: [[UInt8]], wantsSizes: Bool) {
        self.roots = roots
        self.wantsSizes = wantsSizes
        path.reserveCapacity(4096)
        name.reserveCapacity(4096)
    }

    /// The next file, or path that could not be listed, with its name in `name`; `nil` at the end.
    mutating func next() -> Item? {
        while true {
            if let top = stack.indices.last {
                guard let entry = stack[top].nextEntry() else {
                    stack.removeLast()
                    continue
                }
                path.removeSubrange(stack[top].prefixLength...)
                stack[top].appendName(of: entry, to: &path)
                switch entry.kind {
                case .file:
                    setName(path[...])
                    return Item(size: stack[top].size(of: entry), error: 0)
                case .failed:
                    setName(path[...])
                    return Item(size: 0, error: Int32(entry.error))
                case .directory:
                    if let failure = descend() { return failure }
                }
                continue
            }
            guard nextRoot < roots.count else { return nil }
            let root = roots[nextRoot]
            nextRoot += 1
            var info = stat()
            let found = (root + [0]).withUnsafeBufferPointer {
                stat(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), &info)
            }
            guard found == 0 else {
                setName(root[...])
                return Item(size: 0, error: errno)
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                // A file, or anything else named explicitly (a device, a pipe): hashed as sha256sum does.
                setName(root[...])
                return Item(size: Int64(info.st_size), error: 0)
            }
            path.removeAll(keepingCapacity: true)
            path += root
            if path.count > 1, path.last == UInt8(ascii: "/") { path.removeLast() }
            if let failure = descend() { return failure }
        }
    }

    /// Copies `bytes` into `name` (which keeps its storage: no allocation per item).
    private mutating func setName(_ bytes: ArraySlice<UInt8>) {
        name.removeAll(keepingCapacity: true)
        name += bytes
    }

    /// Lists the directory whose path is in `path` and makes it the innermost one being walked; the
    /// error to report about it, if it could not be listed (or not all of it).
    private mutating func descend() -> Item? {
        path.append(0)
        let descriptor = path.withUnsafeBufferPointer {
            open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        path.removeLast()
        guard descriptor >= 0, let directory = fdopendir(descriptor) else {
            let error = errno
            if descriptor >= 0 { close(descriptor) }
            setName(path[...])
            return Item(size: 0, error: error)
        }
        let directoryLength = path.count
        if path != [UInt8(ascii: "/")] { path.append(UInt8(ascii: "/")) }
        var listing = DirectoryListing(prefixLength: path.count, wantsSizes: wantsSizes)
        let readError = listing.read(directory)
        closedir(directory)
        listing.sort(probingFrom: &path)
        stack.append(listing)
        guard readError == 0 else {
            // Reported before the entries that could be read. (Sorted paths would have it before
            // a sibling whose name its own begins too, `x.c` for `x`; a read that fails part way,
            // after the directory opened, is rare enough to leave that be.)
            setName(path[..<directoryLength])
            return Item(size: 0, error: readError)
        }
        return nil
    }
}

/// The entries of one directory that `TreeWalk` visits (regular files, subdirectories, and entries
/// that could not be looked at), sorted in output order, with their names end to end in one array
/// and 8 bytes more per entry (16 when sizes are wanted).
struct DirectoryListing {
    enum Kind: UInt8 {
        case file
        case directory
        /// Not looked at: `fstatat` failed, or a subdirectory could not be opened.
        case failed
    }

    struct Entry {
        /// Where the name starts in `names`.
        var start: UInt32
        var count: UInt16
        var kind: Kind
        /// The `errno` of a failed entry (every `errno` value is below 256).
        var error: UInt8
    }

    /// The names, each after its size (8 bytes) when sizes are wanted.
    private var names: [UInt8] = []
    private var entries: [Entry] = []
    private var nextIndex = 0
    /// The length of the directory's path with the `/` after it.
    let prefixLength: Int
    let wantsSizes: Bool

    init(prefixLength: Int, wantsSizes: Bool) {
        self.prefixLength = prefixLength
        self.wantsSizes = wantsSizes
    }

    mutating func nextEntry() -> Entry? {
        guard nextIndex < entries.count else { return nil }
        defer { nextIndex += 1 }
        return entries[nextIndex]
    }

    func appendName(of entry: Entry, to path: inout [UInt8]) {
        let start = Int(entry.start)
        path += names[start..<start + Int(entry.count)]
    }

    func size(of entry: Entry) -> Int64 {
        guard wantsSizes else { return 0 }
        return names.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: Int(entry.start) - 8, as: Int64.self) }
    }

    /// Reads every entry of `directory`; the `errno` of a read that failed, or 0.
    mutating func read(_ directory: OpaquePointer) -> Int32 {
        while true {
            errno = 0
            guard let entry = readdir(directory) else { break }
            let (reported, length) = withUnsafePointer(to: &entry.pointee.d_name) { name in
                (entry.pointee.d_type, strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self)))
            }
            let isDotOrDotDot = withUnsafeBytes(of: &entry.pointee.d_name) { raw in
                raw[0] == UInt8(ascii: ".") && (length == 1 || (length == 2 && raw[1] == UInt8(ascii: ".")))
            }
            if isDotOrDotDot { continue }

            var type = reported
            var size: Int64 = 0
            var error: Int32 = 0
            if type == UInt8(DT_UNKNOWN) || (type == UInt8(DT_REG) && wantsSizes) {
                var info = stat()
                let status = withUnsafePointer(to: &entry.pointee.d_name) { name in
                    fstatat(dirfd(directory), UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self), &info, AT_SYMLINK_NOFOLLOW)
                }
                if status == 0 {
                    size = Int64(info.st_size)
                    switch info.st_mode & S_IFMT {
                    case S_IFDIR: type = UInt8(DT_DIR)
                    case S_IFREG: type = UInt8(DT_REG)
                    default: type = UInt8(DT_LNK)
                    }
                } else {
                    error = errno
                }
            }
            let kind: Kind
            if error != 0 {
                kind = .failed
            } else if type == UInt8(DT_DIR) {
                kind = .directory
            } else if type == UInt8(DT_REG) {
                kind = .file
            } else {
                continue  // links, devices, sockets: `find -type f` leaves them out too
            }
            if wantsSizes { withUnsafeBytes(of: size.littleEndian) { names += $0 } }
            precondition(names.count + length <= Int(UInt32.max), "a directory with more than 4 GiB of names")
            entries.append(Entry(start: UInt32(names.count), count: UInt16(length), kind: kind, error: UInt8(clamping: error)))
            withUnsafeBytes(of: &entry.pointee.d_name) { names += $0.prefix(length) }
        }
        return errno
    }

    /// Puts the entries in output order. A subdirectory that cannot be opened is reported under its
    /// own name, which comes before the names it begins (`a` before `a.c`), and not where its files
    /// would have come (after them): the subdirectories with such names after them are tried here,
    /// with `path` (the directory's path and a `/`) to name them.
    mutating func sort(probingFrom path: inout [UInt8]) {
        sortEntries()
        var moved = false
        for index in entries.indices.dropFirst() where entries[index].kind == .directory {
            let directory = entries[index], before = entries[index - 1]
            guard before.count > directory.count, hasPrefix(before, directory) else { continue }
            path.removeSubrange(prefixLength...)
            appendName(of: directory, to: &path)
            path.append(0)
            let descriptor = path.withUnsafeBufferPointer {
                open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            }
            if descriptor >= 0 {
                close(descriptor)
            } else {
                entries[index].kind = .failed
                entries[index].error = UInt8(clamping: errno)
                moved = true
            }
        }
        path.removeSubrange(prefixLength...)
        if moved { sortEntries() }
    }

    /// Whether the name of `entry` begins with the name of `prefix`.
    private func hasPrefix(_ entry: Entry, _ prefix: Entry) -> Bool {
        names.withUnsafeBufferPointer { all in
            memcmp(all.baseAddress! + Int(entry.start), all.baseAddress! + Int(prefix.start), Int(prefix.count)) == 0
        }
    }

    /// Sorts by name, with a `/` after the name of a subdirectory.
    private mutating func sortEntries() {
        let slash = UInt8(ascii: "/")
        names.withUnsafeBufferPointer { all in
            let base = all.baseAddress!
            entries.sort { left, right in
                let common = Int(min(left.count, right.count))
                let order = memcmp(base + Int(left.start), base + Int(right.start), common)
                if order != 0 { return order < 0 }
                // One name begins the other (two entries never have the same name): the shorter
                // comes first, unless it is a subdirectory's, whose `/` is then compared with the
                // longer name's next byte.
                if left.count < right.count {
                    return left.kind != .directory || slash < base[Int(right.start) + common]
                }
                return right.kind == .directory && base[Int(left.start) + common] < slash
            }
        }
    }
}
