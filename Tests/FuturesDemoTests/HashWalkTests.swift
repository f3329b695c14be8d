import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The order in which `futures-demo hash` walks a tree, a directory at a time, against
/// `find ... -print0 | LC_ALL=C sort -z`, which sorts every path at once: names that begin other
/// names, bytes below and above `/`, names that are not UTF-8, empty and deep directories.
@Suite(.timeLimit(.minutes(20))) struct HashWalkTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Files (as bytes, under `tree/`) whose paths sort differently folder by folder and as whole
    /// paths unless a folder's name is sorted with its `/`: `a` is a folder, and `a.c`, `a-b`,
    /// `a b`, `a!`, `a\u{1}` sort before `a/` but after `a`; `a0` and `a\u{7F}` after `a/`.
    static let files: [[UInt8]] = [
        Self.bytes("a/x"), Self.bytes("a/y.d/z"), Self.bytes("a/y.d.e"), Self.bytes("a/y-"), Self.bytes("a/y/q"),
        Self.bytes("a.c"), Self.bytes("a-b"), Self.bytes("a b"), Self.bytes("a!"), Self.bytes("a\u{1}"), Self.bytes("a\t"),
        Self.bytes("a0"), Self.bytes("a\u{7F}"), Self.bytes("a.d/f"), Self.bytes("a.d.e"), Self.bytes("ab/c"), Self.bytes("A"),
        Self.bytes("c/c/c"), Self.bytes("c/c."), Self.bytes("c/c-/x"), Self.bytes("c/c0"), Self.bytes("c/c\\/x"),
        Self.bytes("-dash"), Self.bytes(" space"), Self.bytes(".dot"), Self.bytes(".hidden/.x"), Self.bytes("..."),
        [0xFF, UInt8(ascii: "/"), 0xFE], [0xFF, UInt8(ascii: ".")], [0xFF, UInt8(ascii: "-"), 0x80],
        [0xC3, 0x28], Self.bytes("caf\u{E9}"), Self.bytes("cafe\u{301}"), Self.bytes("caf") + [0xE9], Self.bytes("z") + [0x80] + Self.bytes("/z"),
    ]

    /// `tree/` with `files` (small random contents), two empty folders, links to a file and to a
    /// folder (left out by both tools), and a named pipe (left out too).
    static func makeTree(in folder: TemporaryFolder) throws {
        var generator = SystemRandomNumberGenerator()
        for name in files {
            let size = Int.random(in: 0...100, using: &generator)
            try folder.makeFile(Self.bytes("tree/") + name, contents: (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
        mkdir(folder.path("tree/empty"), 0o755)
        mkdir(folder.path("tree/a/empty"), 0o755)
        symlink("a.c", folder.path("tree/a.link"))
        symlink("a", folder.path("tree/a.dirlink"))
        mkfifo(folder.path("tree/a.fifo"), 0o644)
    }

    static let pipeline = "find tree -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum"

    @Test(arguments: [1, 4])
    func theWalkGivesTheOrderOfSortedPaths(jobs: Int) async throws {
        let folder = try TemporaryFolder()
        try Self.makeTree(in: folder)
        let ours = try await shellRun("\"$demo\" hash --jobs \(jobs) tree", in: folder)
        let theirs = try await shellRun(Self.pipeline, in: folder)
        #expect(ours.status == 0)
        #expect(ours.errorBytes.isEmpty)
        #expect(ours.outputBytes == theirs.outputBytes)
        #expect(ours.outputBytes.filter { $0 == UInt8(ascii: "\n") }.count == Self.files.count)
        // The trailing slash of a path given stays in the names, as with `find tree/`.
        let slashed = try await shellRun("\"$demo\" hash tree/", in: folder)
        #expect(slashed.outputBytes == (try await shellRun(Self.pipeline.replacingOccurrences(of: "find tree", with: "find tree/"), in: folder)).outputBytes)
    }

    /// Many names in one folder, of random bytes (any but `/` and NUL), some of them folders.
    @Test func aFolderOfRandomNamesComesOutInSortedOrder() async throws {
        let folder = try TemporaryFolder()
        var generator = SystemRandomNumberGenerator()
        var made = 0
        var taken: Set<[UInt8]> = []
        for _ in 0..<400 {
            let length = Int.random(in: 1...6, using: &generator)
            // Mostly bytes near `/`, so that names begin one another often.
            let alphabet: [UInt8] = [0x01, 0x20, 0x21, 0x2D, 0x2E, 0x30, 0x41, 0x61, 0x7F, 0x80, 0xFF]
            let name = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            guard taken.insert(name).inserted else { continue }
            let path = Self.bytes("tree/") + name
            // Every third one a folder with a file in it.
            try folder.makeFile(made % 3 == 0 ? path + Self.bytes("/f") : path, contents: [UInt8(truncatingIfNeeded: made)])
            made += 1
        }
        let ours = try await shellRun("\"$demo\" hash --jobs 2 tree", in: folder)
        let theirs = try await shellRun(Self.pipeline, in: folder)
        #expect(ours.status == 0)
        #expect(ours.outputBytes == theirs.outputBytes)
        #expect(ours.outputBytes.filter { $0 == UInt8(ascii: "\n") }.count == made)
    }

    @Test func anEmptyTreePrintsNothing() async throws {
        let folder = try TemporaryFolder()
        mkdir(folder.path("tree"), 0o755)
        mkdir(folder.path("tree/empty"), 0o755)
        mkdir(folder.path("tree/empty/also"), 0o755)
        let ours = try await run(["hash", "tree", "tree/empty"], in: folder)
        #expect(ours.status == 0)
        #expect(ours.output == "")
        #expect(ours.error == "")
        #expect((try await shellRun(Self.pipeline, in: folder)).output == "")
    }

    /// 300 folders deep, with a file at every tenth level and beside the deepest folder.
    @Test func aDeepTree() async throws {
        let folder = try TemporaryFolder()
        var path = Self.bytes("tree")
        var count = 0
        for level in 0..<300 {
            path += Self.bytes(level % 2 == 0 ? "/d" : "/d.e")
            if level % 10 == 0 {
                try folder.makeFile(path + Self.bytes("/f"), contents: [UInt8(truncatingIfNeeded: level)])
                try folder.makeFile(path + Self.bytes("-f"), contents: [UInt8(truncatingIfNeeded: level)])
                count += 2
            }
        }
        try folder.makeFile(path + Self.bytes("/last"), contents: [])
        count += 1
        let ours = try await shellRun("\"$demo\" hash tree", in: folder)
        let theirs = try await shellRun(Self.pipeline, in: folder)
        #expect(ours.status == 0)
        #expect(ours.outputBytes == theirs.outputBytes)
        #expect(ours.outputBytes.filter { $0 == UInt8(ascii: "\n") }.count == count)
    }

    /// Folders that cannot be read, one of them with names that begin its own after it (`x.c`
    /// after `x`): reported under their names, where `LC_ALL=C sort` puts those names, with
    /// `find`'s words. As root, run as nobody (root reads every folder).
    @Test(.enabled(if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func unreadableFoldersAreReportedWhereTheirNamesSort() async throws {
        let folder = try TemporaryFolder()
        for name in ["x/in", "x.c", "x-d/in", "x0", "y/z/in", "y/z.c", "y/z0", "w"] {
            try folder.makeFile(Self.bytes("tree/") + Self.bytes(name), contents: Self.bytes(name))
        }
        chmod(folder.path("tree/x"), 0)
        chmod(folder.path("tree/y/z"), 0)
        defer {
            chmod(folder.path("tree/x"), 0o755)
            chmod(folder.path("tree/y/z"), 0o755)
        }
        // As nobody, a sanitized build's leak checker could not open its suppressions file (under
        // a folder only its owner reads) and would say so in the output: it is off for this run.
        let asUser = getuid() == 0 ? "LSAN_OPTIONS=detect_leaks=0 /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups " : ""
        let ours = try await shellRun("\(asUser)\"$demo\" hash tree 2>&1", in: folder)
        #expect(ours.status == 1)
        let expected = try [
            shell("sha256sum tree/w", in: folder), "futures-demo: tree/x: Permission denied\n",
            shell("sha256sum tree/x-d/in tree/x.c tree/x0", in: folder), "futures-demo: tree/y/z: Permission denied\n",
            shell("sha256sum tree/y/z.c tree/y/z0", in: folder),
        ]
        #expect(ours.output == expected.joined())
        let theirs = try await shellRun("\(asUser)env LC_ALL=C find tree -type f 2>&1 >/dev/null", in: folder)
        #expect(theirs.output.contains("find: 'tree/x': Permission denied"))
        #expect(theirs.output.contains("find: 'tree/y/z': Permission denied"))
    }
}
