#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line of the output to come: a file to hash (and, with `--check`, the digest it should have),
/// or a path that could not be listed.
struct HashInput: Sendable {
    /// What the output line names; also where the file is opened.
    var name: Name
    /// The size when listed, for the progress bar (0 if not known or not asked for).
    var size: Int64
    /// The `errno` that stopped listing it, or 0.
    var listError: Int32 = 0
    /// With `--check`: the digest the file should have.
    var expected: Digest? = nil
}

/// Lists what `hash` hashes, in output order, with the names as bytes.
///
/// Directories are read with `opendir`/`readdir`, and a file is looked at with `fstatat` only when
/// the directory entry does not say its type (or its size is wanted for the progress bar).
struct FileList {
    private var names = NameTableBuilder()
    private(set) var inputs: [HashInput] = []
    /// Whether to find each file's size.
    let wantsSizes: Bool

    init(wantsSizes: Bool) {
        self.wantsSizes = wantsSizes
    }

    /// The names, once the list is complete.
    func table() -> NameTable { NameTable(bytes: names.bytes) }

    /// Adds every input of `path`: a file as it is; for a directory, its regular files (symbolic
    /// links are not followed below it) in byte order of their paths, as
    /// `find DIR -type f | LC_ALL=C sort` lists them.
    mutating func add(path: [UInt8]) {
        var info = stat()
        let found = (path + [0]).withUnsafeBufferPointer { stat(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), &info) }
        guard found == 0 else {
            inputs.append(HashInput(name: names.add(path), size: 0, listError: errno))
            return
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            // A file, or anything else named explicitly (a device, a pipe): hashed as sha256sum does.
            inputs.append(HashInput(name: names.add(path), size: Int64(info.st_size)))
            return
        }
        let first = inputs.count
        var prefix = path
        if prefix.count > 1, prefix.last == UInt8(ascii: "/") { prefix.removeLast() }
        walk(directory: &prefix)
        var listed = Array(inputs[first...])
        names.sort(&listed) { (input: HashInput) in input.name }
        inputs.replaceSubrange(first..., with: listed)
    }

    /// Lists the directory whose path is in `path` (which is restored before returning).
    private mutating func walk(directory path: inout [UInt8]) {
        path.append(0)
        let descriptor = path.withUnsafeBufferPointer {
            open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        path.removeLast()
        guard descriptor >= 0, let directory = fdopendir(descriptor) else {
            let error = errno
            if descriptor >= 0 { close(descriptor) }
            inputs.append(HashInput(name: names.add(path), size: 0, listError: error))
            return
        }
        // The subdirectories are walked after this one is closed, so that a deep tree does not
        // hold a descriptor per level.
        var subdirectories: [[UInt8]] = []
        let parentCount = path.count
        let joined = path == [UInt8(ascii: "/")] ? path : path + [UInt8(ascii: "/")]
        path = joined
        while true {
            errno = 0
            guard let entry = readdir(directory) else { break }
            let (kind, nameLength) = withUnsafePointer(to: &entry.pointee.d_name) { name in
                (entry.pointee.d_type, strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self)))
            }
            withUnsafeBytes(of: &entry.pointee.d_name) { raw in
                path.append(contentsOf: raw.prefix(nameLength))
            }
            defer { path.removeSubrange(joined.count...) }
            let name = path[joined.count...]
            if name.elementsEqual([UInt8(ascii: ".")]) || name.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) { continue }

            var type = kind
            var size: Int64 = 0
            if type == UInt8(DT_UNKNOWN) || (type == UInt8(DT_REG) && wantsSizes) {
                var info = stat()
                let status = withUnsafePointer(to: &entry.pointee.d_name) { name in
                    fstatat(dirfd(directory), UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self), &info, AT_SYMLINK_NOFOLLOW)
                }
                guard status == 0 else {
                    inputs.append(HashInput(name: names.add(path), size: 0, listError: errno))
                    continue
                }
                size = Int64(info.st_size)
                switch info.st_mode & S_IFMT {
                case S_IFDIR: type = UInt8(DT_DIR)
                case S_IFREG: type = UInt8(DT_REG)
                default: type = UInt8(DT_LNK)
                }
            }
            switch type {
            case UInt8(DT_DIR): subdirectories.append(path)
            case UInt8(DT_REG): inputs.append(HashInput(name: names.add(path), size: size))
            default: continue  // links, devices, sockets: `find -type f` leaves them out too
            }
        }
        let readError = errno
        closedir(directory)
        path.removeSubrange(parentCount...)
        if readError != 0 {
            inputs.append(HashInput(name: names.add(path), size: 0, listError: readError))
        }
        for var subdirectory in subdirectories {
            walk(directory: &subdirectory)
        }
    }
}
