import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `futures-demo hash` and `hash --check` on names that are not plain: compared byte for byte with
/// what `sha256sum` and `sha256sum -c`, run here on the same files, print (standard error with the
/// program's name changed).
@Suite(.timeLimit(.minutes(20))) struct HashNamesAndCheckTests {
    /// Names (as bytes) under `tree/`, with their sizes: spaces, backslashes, newlines, carriage
    /// returns, quotes, shell characters, bytes that are not UTF-8 (in a file and in a folder name),
    /// empty files, a file over one read chunk, and names whose order differs between a walk sorted
    /// folder by folder and `LC_ALL=C sort` of whole paths (`a.b`, `a/b`, `a-b`).
    static let awkward: [([UInt8], Int)] = [
        (bytes("plain"), 10), (bytes("sp ace"), 11), (bytes("  lead"), 12), (bytes("trail "), 13),
        (bytes("back\\slash"), 14), (bytes("\\"), 15), (bytes("ends\\"), 16),
        (bytes("new\nline"), 17), (bytes("\n"), 18), (bytes("cr\rx"), 19), (bytes("crlf\r\nx"), 20),
        (bytes("bad") + [0xFF], 21), ([0xC3, 0x28], 22), ([0xFE, 0xFF, 0x80], 23), (bytes("lat") + [0xE9], 24),
        (bytes("caf\u{E9}"), 25), (bytes("quote'"), 26), (bytes("dq\""), 27), (bytes("tab\tx"), 28),
        (bytes("star*"), 29), (bytes("#hash"), 30), (bytes("-dash"), 31), (bytes("colon:x"), 32),
        (bytes("empty"), 0), (bytes("also empty"), 0), (bytes("big"), (1 << 20) + 7),
        (bytes("a.b"), 33), (bytes("a/b"), 34), (bytes("a-b"), 35), (bytes("A"), 36),
        (bytes("dir") + [0xFF] + bytes("/inner\\name"), 37), (bytes("deep/er/\nst"), 38),
    ]

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Makes `tree/` with the awkward names, and a symbolic link (left out by both tools).
    static func makeAwkwardTree(in folder: TemporaryFolder) throws {
        // Random bytes from a linear congruential generator seeded once: asking the system for
        // each of a megabyte's bytes took minutes under a sanitizer.
        var state = UInt64.random(in: .min ... .max)
        for (name, size) in awkward {
            let contents = (0..<size).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 56)
            }
            try folder.makeFile(bytes("tree/") + name, contents: contents)
        }
        symlink("plain", folder.path("tree/link"))
    }

    /// `sha256sum` messages on standard error, with this program's name.
    static func asOurs(_ error: Data) -> Data {
        var text = [UInt8](error)
        let theirs = bytes("sha256sum: "), ours = bytes("futures-demo: ")
        var result: [UInt8] = []
        var index = 0
        while index < text.count {
            if (index == 0 || text[index - 1] == UInt8(ascii: "\n")), text[index...].starts(with: theirs) {
                result += ours
                index += theirs.count
            } else {
                result.append(text[index])
                index += 1
            }
        }
        text = result
        return Data(text)
    }

    @Test(arguments: [1, 2, 5])
    func awkwardNamesArePrintedAsSha256sumPrintsThem(jobs: Int) async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        let ours = try await shellRun("\"$demo\" hash --jobs \(jobs) tree", in: folder)
        let theirs = try await shellRun("find tree -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum", in: folder)
        #expect(ours.status == 0)
        #expect(ours.errorBytes.isEmpty)
        #expect(ours.outputBytes == theirs.outputBytes)
        // One line per file: the newlines in names are escaped.
        #expect(ours.outputBytes.filter { $0 == UInt8(ascii: "\n") }.count == Self.awkward.count)
    }

    @Test func awkwardNamesGivenAsArgumentsAreOpenedAndPrintedAsTheyAre() async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        // Bytes that are not UTF-8 cannot be put in a Swift string: the shell's printf makes them.
        let arguments = #""$(printf 'tree/bad\377')" "$(printf 'tree/\376\377\200')" 'tree/back\slash' "$(printf 'tree/new\nline')" 'tree/sp ace' tree/empty "$(printf 'tree/dir\377')" tree/a"#
        let ours = try await shellRun("\"$demo\" hash \(arguments)", in: folder)
        let theirs = try await shellRun("for path in \(arguments); do if [ -d \"$path\" ]; then find \"$path\" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; else sha256sum \"$path\"; fi; done", in: folder)
        #expect(ours.status == 0)
        #expect(ours.errorBytes.isEmpty)
        #expect(ours.outputBytes == theirs.outputBytes)
        #expect(String(decoding: ours.outputBytes, as: UTF8.self).contains("  tree/dir\u{FFFD}/inner\\\\name\n"))
    }

    /// Missing paths (with names a shell would have to quote) and a file that cannot be read (this
    /// process's own memory, which reads fail on, whoever runs the tests): the same messages as
    /// `sha256sum`, and the others go on.
    @Test func missingAndUnreadablePathsGetSha256sumsMessages() async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        let arguments = #"missing 'no such' "it's" "$(printf 'bad\377')" "$(printf 'new\nline')" 'x\y' tree/plain '' /proc/self/mem tree/empty"#
        let ours = try await shellRun("\"$demo\" hash \(arguments)", in: folder)
        let theirs = try await shellRun("sha256sum \(arguments)", in: folder)
        #expect(ours.status == 1)
        #expect(ours.outputBytes == theirs.outputBytes)
        #expect(ours.errorBytes == Self.asOurs(theirs.errorBytes))
        #expect(ours.error.contains(#"futures-demo: 'bad'$'\377': No such file or directory"#))
        #expect(ours.error.contains("futures-demo: /proc/self/mem: Input/output error\n"))
    }

    @Test(.disabled(if: getuid() == 0, "root reads every file"))
    func unreadableFilesAndFoldersInATreeAreReported() async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        chmod(folder.path("tree/plain"), 0)
        chmod(folder.path("tree/deep/er"), 0)
        defer { chmod(folder.path("tree/deep/er"), 0o755) }
        let ours = try await run(["hash", "tree"], in: folder)
        #expect(ours.status == 1)
        #expect(ours.error.contains("futures-demo: tree/plain: Permission denied\n"))
        #expect(ours.error.contains("futures-demo: tree/deep/er: Permission denied\n"))
    }

    // MARK: - --check

    /// A list as `sha256sum` writes it for the awkward tree, then changed: two files changed and
    /// one listed again with the wrong digest (mismatches), two removed, a directory and an unreadable file listed (could not be read),
    /// and lines of every other form `sha256sum -c` reads or rejects.
    static func makeCheckList(in folder: TemporaryFolder) throws {
        try makeAwkwardTree(in: folder)
        _ = try shell("find tree -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum > sums", in: folder)
        _ = try shell("printf changed > tree/plain; printf x >> tree/big; rm 'tree/sp ace' \"$(printf 'tree/bad\\377')\"", in: folder)
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        let extra = [
            "\(empty)  tree",  // a directory
            "\(empty)  /proc/self/mem",  // a read error
            "not a checksum line",
            "# a comment",
            "",
            "\(empty)  tree/empty\r",  // a carriage return before the newline
            "  \(empty) *tree/also empty",  // blanks first; binary mark
            "SHA256 (tree/empty) = \(empty)",
            "SHA256 (tree/sp ace) = \(empty)",
            "\\SHA256 (tree/new\\nline) = \(empty)",
            "\(empty.uppercased())  tree/empty",
            "\(empty)0  tree/empty",  // too long
            "\(empty) tree/empty",  // one space, after the two-space form: improper
            "\\\(empty)  tree/bad\\escape",  // an escape sha256sum does not know
            " # not a comment: blanks first",
        ]
        var list = try Data(contentsOf: folder.url.appendingPathComponent("sums"))
        list += Data((extra.joined(separator: "\n") + "\n").utf8)
        list += Data("\(empty)  tree/empty".utf8)  // no newline at the end
        try list.write(to: folder.url.appendingPathComponent("sums"))
    }

    @Test(arguments: [1, 2, 7])
    func checkPrintsWhatSha256sumCheckPrints(jobs: Int) async throws {
        let folder = try TemporaryFolder()
        try Self.makeCheckList(in: folder)
        let ours = try await shellRun("\"$demo\" hash --jobs \(jobs) --check sums", in: folder)
        let theirs = try await shellRun("sha256sum -c sums", in: folder)
        #expect(theirs.status == 1)
        #expect(ours.status == theirs.status)
        #expect(ours.outputBytes == theirs.outputBytes)
        #expect(ours.errorBytes == Self.asOurs(theirs.errorBytes))
        // What the list holds, so the comparison above covers it.
        for expected in ["tree/plain: FAILED\n", "tree/big: FAILED\n", "tree/sp ace: FAILED open or read\n", "tree: FAILED open or read\n", "\\tree/new\\nline: OK\n", "\\tree/new\\nline: FAILED\n", "tree/back\\slash: OK\n"] {
            #expect(ours.output.contains(expected), "\(expected)")
        }
        for expected in [
            "futures-demo: 'tree/sp ace': No such file or directory\n", "futures-demo: tree: Is a directory\n",
            "futures-demo: /proc/self/mem: Input/output error\n",
            "futures-demo: WARNING: 5 lines are improperly formatted\n",
            "futures-demo: WARNING: 5 listed files could not be read\n",
            "futures-demo: WARNING: 3 computed checksums did NOT match\n",
        ] {
            #expect(ours.error.contains(expected), "\(expected)")
        }
    }

    @Test func checkOfAnIntactTreeSucceedsSilentlyOnStandardError() async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        _ = try shell("find tree -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum > sums", in: folder)
        let ours = try await shellRun("\"$demo\" hash --check sums", in: folder)
        let theirs = try await shellRun("sha256sum -c sums", in: folder)
        #expect(ours.status == 0)
        #expect(ours.errorBytes.isEmpty)
        #expect(ours.outputBytes == theirs.outputBytes)
        // Read from standard input, and a line naming `-` there reads the standard input itself.
        let piped = try await shellRun("\"$demo\" hash --check - < sums", in: folder)
        #expect(piped.outputBytes == theirs.outputBytes)
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        try Data("\(empty)  -\n".utf8).write(to: folder.url.appendingPathComponent("dash"))
        let dash = try await shellRun("\"$demo\" hash --check dash < /dev/null", in: folder)
        #expect(dash.output == "-: OK\n")
        #expect(dash.status == 0)
    }

    /// One line that is not a checksum line among good ones: a warning, but status 0, as
    /// `sha256sum -c` (without `--strict`) gives; the one-space form alone is read too.
    @Test func improperLinesAloneWarnButSucceed() async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        _ = try shell("sha256sum tree/plain > sums; echo junk >> sums; sha256sum tree/empty | sed 's/  / /' > one-space; sha256sum tree/empty | sed 's/  / /' >> one-space; sha256sum tree/plain >> one-space", in: folder)
        for list in ["sums", "one-space"] {
            let ours = try await shellRun("\"$demo\" hash --check \(list)", in: folder)
            let theirs = try await shellRun("sha256sum -c \(list)", in: folder)
            #expect(ours.status == theirs.status, "\(list)")
            #expect(ours.outputBytes == theirs.outputBytes, "\(list)")
            #expect(ours.errorBytes == Self.asOurs(theirs.errorBytes), "\(list)")
        }
        #expect(try await shellRun("\"$demo\" hash --check sums", in: folder).status == 0)
    }

    @Test func checkListsThatCannotBeUsed() async throws {
        let folder = try TemporaryFolder()
        try Self.makeAwkwardTree(in: folder)
        _ = try shell("printf 'junk\\n\\n# comment\\n' > junk", in: folder)
        for command in ["--check junk", "--check missing", "--check - < junk", "--check /dev/null"] {
            let ours = try await shellRun("\"$demo\" hash \(command)", in: folder)
            let theirs = try await shellRun("sha256sum \(command.replacingOccurrences(of: "--check", with: "-c"))", in: folder)
            #expect(ours.status == 1, "\(command)")
            #expect(theirs.status == 1, "\(command)")
            #expect(ours.outputBytes.isEmpty, "\(command)")
            #expect(ours.errorBytes == Self.asOurs(theirs.errorBytes), "\(command)")
        }
        let directory = try await run(["hash", "--check", "tree"], in: folder)
        #expect(directory.status == 1)
        #expect(directory.error == "futures-demo: tree: read error\n")
    }

    @Test func checkTimesOutSlowFilesAsUnreadable() async throws {
        let folder = try TemporaryFolder()
        try folder.makeSparseFile("huge.img", size: 40 << 30)
        try folder.makeSparseFile("huge2.img", size: 40 << 30)
        _ = try shell("printf x > small; sha256sum small > sums; echo \"$(sha256sum small | cut -c1-64)  huge.img\" >> sums; echo \"$(sha256sum small | cut -c1-64)  huge2.img\" >> sums", in: folder)
        let ours = try await run(["hash", "--jobs", "2", "--timeout", "0.3", "--check", "sums"], in: folder)
        #expect(ours.status == 1)
        #expect(ours.output == "small: OK\nhuge.img: FAILED open or read\nhuge2.img: FAILED open or read\n")
        #expect(ours.error == """
            futures-demo: huge.img: timed out after 0.3 s
            futures-demo: huge2.img: timed out after 0.3 s
            futures-demo: WARNING: 2 listed files could not be read

            """)
    }

    @Test func ctrlCStopsACheckWith130() async throws {
        let folder = try TemporaryFolder()
        try folder.makeSparseFile("huge.img", size: 40 << 30)
        try folder.makeSparseFile("huge2.img", size: 40 << 30)
        _ = try shell("printf x > small; sha256sum small > sums; sha256sum small | sed 's/small/huge.img/' >> sums; sha256sum small | sed 's/small/huge2.img/' >> sums", in: folder)
        // Once the first verdict is out, the huge files are being read.
        let (_, status, stdout, message) = try await interruptAfterFirstLine(["hash", "--jobs", "2", "--check", "sums"], in: folder)
        #expect(status == 130)
        #expect(stdout == "small: OK\n")
        #expect(message.contains("futures-demo: interrupted: 1 of 3 files checked, the rest cancelled"))
    }

    // MARK: - Arguments

    @Test func negativeAndOutOfRangeNumbersSayWhatIsWrong() async throws {
        let folder = try TemporaryFolder()
        let cases: [([String], String)] = [
            (["hash", "--jobs", "-3", "x"], "Error: --jobs must be at least 1, not -3."),
            (["hash", "--jobs=-3", "x"], "Error: --jobs must be at least 1, not -3."),
            (["hash", "--jobs", "0", "x"], "Error: --jobs must be at least 1, not 0."),
            (["hash", "--jobs", "65537", "x"], "Error: --jobs must be at most 65536, not 65537."),
            (["hash", "--timeout", "-1", "x"], "Error: --timeout must be above 0 seconds, not -1."),
            (["hash", "--timeout", "-0.5", "x"], "Error: --timeout must be above 0 seconds, not -0.5."),
            (["hash", "--timeout", "0", "x"], "Error: --timeout must be above 0 seconds, not 0."),
            (["hash", "--timeout", "1e16", "x"], "Error: --timeout must be at most 1e9 seconds, not"),
            (["hash", "--timeout", "nan", "x"], "Error: --timeout must be a number of seconds, not nan."),
            (["hash", "--check", "sums", "x"], "Error: --check takes the files to check from its list: give no path with it."),
            (["hash"], "Error: Give at least one file or directory."),
        ]
        for (arguments, message) in cases {
            let ours = try await run(arguments, in: folder)
            #expect(ours.status == 2, "\(arguments)")
            #expect(ours.error.hasPrefix(message), "\(arguments): \(ours.error)")
            #expect(!ours.error.contains("Missing value"), "\(arguments)")
            #expect(ours.output == "")
        }
    }
}

extension TemporaryFolder {
    /// A file whose path (relative to the folder, as bytes: it need not be UTF-8) is `relative`,
    /// with the folders it needs.
    func makeFile(_ relative: [UInt8], contents: [UInt8]) throws {
        var path = Array(url.path.utf8) + [UInt8(ascii: "/")]
        for (index, byte) in relative.enumerated() {
            if byte == UInt8(ascii: "/") {
                let folder = path + relative[..<index] + [0]
                _ = folder.withUnsafeBufferPointer { mkdir(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), 0o755) }
            }
        }
        path += relative + [0]
        let descriptor = path.withUnsafeBufferPointer {
            open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(descriptor) }
        var written = 0
        while written < contents.count {
            let count = contents[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { throw CocoaError(.fileWriteUnknown) }
            written += count
        }
    }
}
