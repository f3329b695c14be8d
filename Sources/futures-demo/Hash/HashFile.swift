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
}

/// The size of each read: large enough that a read is cheap against hashing it, small enough that
/// a chunk takes about a millisecond, so a cancelled file stops at once and other work waiting for
/// the shared threads gets its turn.
let chunkSize = 1 << 20

/// Hashes the file at `path`, one chunk per job on the global queue; `counted` is told of the bytes
/// of each chunk.
///
/// Each chunk is a step of a `flatMap` chain, so the file is read in jobs of a millisecond or so:
/// a whole file in one job would hold one of the few threads of the shared pool for as long as it
/// takes, starving everything else that needs one (timers, signal handlers). Cancelling the
/// future stops the chain before its next chunk.
func sha256(ofFileAt path: String, counted: @escaping @Sendable (Int) -> Void) -> Future<String> {
    Future(on: .global()) { try FileDigest(path: path, counted: counted) }
        .flatMap(on: .immediate) { $0.next() }
}

/// An open file being hashed: the descriptor, the hasher and the buffer, used by one chunk's job
/// at a time.
final class FileDigest: @unchecked Sendable {
    // Safety: each chunk's job runs after the previous one has completed (the jobs are the steps
    // of one `flatMap` chain), so the mutable state is never touched by two threads at once.
    private let descriptor: Int32
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 64)
    private var hasher = SHA256()
    private let counted: @Sendable (Int) -> Void

    init(path: String, counted: @escaping @Sendable (Int) -> Void) throws {
        descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            buffer.deallocate()
            throw HashFailure(description: reason)
        }
        self.counted = counted
    }

    deinit {
        if descriptor >= 0 {
            close(descriptor)
            buffer.deallocate()
        }
    }

    /// Reads and hashes the next chunk on the global queue; the digest once the file ends.
    func next() -> Future<String> {
        Future(on: .global()) { try self.readChunk() }
            .flatMap(on: .immediate) { hex -> Future<String> in
                hex.map { Future(value: $0) } ?? self.next()
            }
    }

    /// Hashes one chunk; the digest in hex at the end of the file, else `nil`.
    private func readChunk() throws -> String? {
        var count: Int
        repeat { count = read(descriptor, buffer.baseAddress, chunkSize) } while count < 0 && errno == EINTR
        guard count >= 0 else { throw HashFailure(description: String(cString: strerror(errno))) }
        guard count > 0 else { return hasher.finalize().map { String(format: "%02x", $0) }.joined() }
        hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        counted(count)
        return nil
    }
}
