import Crypto
import Dispatch
import Foundation
import Futures
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a file was not hashed.
struct HashFailure: Error, CustomStringConvertible {
    let description: String

    init(description: String) {
        self.description = description
    }

    init(errno code: Int32) {
        description = String(cString: strerror(code))
    }
}

/// The size of each read: large enough that a read is cheap against hashing it, small enough that
/// a chunk takes about a millisecond, so a cancelled file stops at once and other work waiting for
/// the shared threads gets its turn.
let chunkSize = 1 << 20

/// Read buffers of `chunkSize` bytes, kept for the next file instead of freed: at most as many are
/// ever made as files are read at once.
final class BufferPool: @unchecked Sendable {
    // Safety: `free` is only touched while holding `lock`; a buffer is used by one file at a time
    // (it leaves the pool in `take` and comes back in `give`).
    private let lock = NSLock()
    private var free: [UnsafeMutableRawBufferPointer] = []

    func take() -> UnsafeMutableRawBufferPointer {
        lock.lock()
        let buffer = free.popLast()
        lock.unlock()
        return buffer ?? .allocate(byteCount: chunkSize, alignment: 64)
    }

    func give(_ buffer: UnsafeMutableRawBufferPointer) {
        lock.lock()
        free.append(buffer)
        lock.unlock()
    }

    deinit {
        for buffer in free { buffer.deallocate() }
    }
}

/// What to read: a name in a table, or standard input (`-` in a `--check` list).
struct FileSource: Sendable {
    let names: NameTable
    let name: Name
    let isStandardInput: Bool
}

/// Hashes a file, a chunk per job on the global queue; `counted` is told of the bytes of each
/// chunk.
///
/// The first job opens the file and reads its first chunk, so a file of up to a chunk is read,
/// hashed and closed in one job, and its future completed by that job with no further step. A
/// bigger one goes on in a `flatMap` chain, a chunk per step, which the first future adopts: a
/// whole file in one job would hold one of the few threads of the shared pool for as long as it
/// takes, starving everything else that needs one (timers, signal handlers). Cancelling the
/// future stops the chain before its next chunk (or the first job before it opens the file).
func sha256(of source: FileSource, buffers: BufferPool, counted: (@Sendable (Int) -> Void)?) -> Future<Digest> {
    let promise = Promise<Digest>()
    if FutureDiagnostics.isTracking {
        promise.future.named(source.isStandardInput ? "read standard input" : "read \(source.names.string(source.name))")
    }
    DispatchQueue.global().async {
        if promise.isCancelled { return }
        do {
            switch try FileDigest(source: source, buffers: buffers, counted: counted).step() {
            case .done(let digest): promise.succeed(digest)
            case .more(let file): promise.complete(with: file.next())
            }
        } catch {
            promise.fail(error)
        }
    }
    return promise.future
}

/// After a chunk: the digest, or the file to go on reading.
enum DigestStep: Sendable {
    case done(Digest)
    case more(FileDigest)

    func rest() -> Future<Digest> {
        switch self {
        case .done(let digest): Future(value: digest)
        case .more(let file): file.next()
        }
    }
}

/// An open file being hashed: the descriptor, the hasher and a buffer from the pool, used by one
/// chunk's job at a time.
final class FileDigest: @unchecked Sendable {
    // Safety: each chunk's job runs after the previous one has completed (the jobs are the steps
    // of one `flatMap` chain), so the mutable state is never touched by two threads at once.
    private var descriptor: Int32
    private var buffer: UnsafeMutableRawBufferPointer?
    private var hasher = SHA256()
    private let buffers: BufferPool
    private let counted: (@Sendable (Int) -> Void)?

    init(source: FileSource, buffers: BufferPool, counted: (@Sendable (Int) -> Void)?) throws {
        descriptor = source.isStandardInput
            ? dup(STDIN_FILENO) : source.names.withCString(source.name) { open($0, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw HashFailure(errno: errno) }
        self.buffers = buffers
        self.counted = counted
        buffer = buffers.take()
    }

    deinit { finish() }

    /// Closes the file and gives the buffer back, once.
    private func finish() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        if let buffer {
            buffers.give(buffer)
            self.buffer = nil
        }
    }

    /// Reads and hashes the next chunk on the global queue; the digest once the file ends.
    func next() -> Future<Digest> {
        Future(on: .global()) { try self.step() }
            .flatMap(on: .immediate) { $0.rest() }
    }

    /// Fills the buffer (or reads to the end of the file) and hashes what was read.
    func step() throws -> DigestStep {
        guard let buffer, descriptor >= 0 else { throw CancellationError() }
        var filled = 0
        var ended = false
        while filled < chunkSize {
            let count = read(descriptor, buffer.baseAddress! + filled, chunkSize - filled)
            if count < 0 {
                if errno == EINTR { continue }
                let error = errno
                finish()
                throw HashFailure(errno: error)
            }
            if count == 0 {
                ended = true
                break
            }
            filled += count
        }
        if filled > 0 {
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<filled]))
            counted?(filled)
        }
        guard ended else { return .more(self) }
        finish()
        return .done(hasher.finalize().withUnsafeBytes { Digest($0) })
    }
}
