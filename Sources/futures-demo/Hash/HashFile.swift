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
/// a cancelled file stops within a millisecond or so.
let chunkSize = 1 << 20

/// Hashes the file at `path` on a background queue, reading it a chunk at a time; `counted` is told
/// of the bytes of each chunk. The future's progress follows the bytes read of `size`.
///
/// Cancelling the future stops the work before the next chunk.
func sha256(ofFileAt path: String, size: Int64, counted: @escaping @Sendable (Int) -> Void) -> Future<String> {
    let promise = Promise<String>()
    DispatchQueue.global().async {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else {
            _ = promise.fail(HashFailure(description: String(cString: strerror(errno))))
            return
        }
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 64)
        defer { buffer.deallocate() }
        var hasher = SHA256()
        var done: Int64 = 0
        while !promise.isCancelled {
            let count = read(descriptor, buffer.baseAddress, chunkSize)
            if count < 0 {
                if errno == EINTR { continue }
                _ = promise.fail(HashFailure(description: String(cString: strerror(errno))))
                return
            }
            if count == 0 {
                let digest = hasher.finalize()
                _ = promise.succeed(digest.map { String(format: "%02x", $0) }.joined())
                return
            }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            done += Int64(count)
            counted(count)
            if size > 0 { promise.progress = Double(done) / Double(size) }
        }
    }
    return promise.future
}
