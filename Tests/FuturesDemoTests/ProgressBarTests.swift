import Testing

import futures_demo

/// The progress bar's text at every terminal width from 60 to 200 columns: it fits, and every
/// field it shows is whole.
@Suite struct ProgressBarTests {
    static let states: [ProgressSnapshot] = [
        // Just started: nothing read, no rate, no time left.
        ProgressSnapshot(bytes: 0, totalBytes: 43_000_000_000, files: 0, totalFiles: 8, seconds: 0),
        // The README's example.
        ProgressSnapshot(bytes: 1_200_000_000, totalBytes: 43_000_000_000, files: 7, totalFiles: 8, seconds: 1.83),
        // Wide numbers everywhere.
        ProgressSnapshot(bytes: 987_654_321_000, totalBytes: 999_999_999_999_999, files: 1_234_567, totalFiles: 9_876_543, seconds: 3.5),
        // Empty files only: the fraction comes from the files.
        ProgressSnapshot(bytes: 0, totalBytes: 0, files: 3, totalFiles: 9, seconds: 1),
        // Done.
        ProgressSnapshot(bytes: 3_400_000_000, totalBytes: 3_400_000_000, files: 40, totalFiles: 40, seconds: 9.7),
    ]

    /// The fields the bar may show for `state`, whole.
    static func fields(_ state: ProgressSnapshot) -> Set<String> {
        let rate = state.seconds > 0 ? Double(state.bytes) / state.seconds : 0
        var fields: Set<String> = [
            "\(ProgressBar.byteCount(state.bytes)) of \(ProgressBar.byteCount(state.totalBytes))",
            "\(state.files)/\(state.totalFiles) files",
            "\(ProgressBar.byteCount(Int64(rate)))/s",
        ]
        if rate > 0, state.bytes < state.totalBytes {
            let left = Int((Double(state.totalBytes - state.bytes) / rate).rounded(.up))
            fields.insert("\(left / 60):\(left % 60 < 10 ? "0" : "")\(left % 60) left")
        }
        return fields
    }

    @Test(arguments: 60...200)
    func fitsTheWidthAndCutsNoField(columns: Int) {
        for state in Self.states {
            let text = ProgressBar.text(state, columns: columns)
            #expect(text.count <= columns - 1, "\(columns): \(text)")
            // `[###...]`, the percentage right-aligned in 4 characters, then whole fields, two
            // spaces apart.
            guard let close = text.firstIndex(of: "]") else {
                Issue.record("\(columns): no bar in \(text)")
                continue
            }
            let bar = text[...close]
            #expect(bar.hasPrefix("[") && (12...32).contains(bar.count), "\(columns): \(text)")
            #expect(bar.dropFirst().dropLast().allSatisfy { $0 == "#" || $0 == "." }, "\(columns): \(text)")
            let afterBar = text[text.index(after: close)...]
            let percent = afterBar.prefix(5)
            #expect(percent.hasPrefix(" ") && percent.hasSuffix("%"), "\(columns): \(text)")
            #expect(Int(percent.dropLast().trimmingPrefix(while: { $0 == " " })) != nil, "\(columns): \(text)")
            let rest = afterBar.dropFirst(5)
            #expect(rest.isEmpty || rest.hasPrefix("  "), "\(columns): \(text)")
            // Fields are padded on the left to their widest, so that they keep their places.
            let shown = rest.components(separatedBy: "  ").map { $0.trimmingPrefix(while: { $0 == " " }) }.filter { !$0.isEmpty }
            for field in shown {
                #expect(Self.fields(state).contains(String(field)), "\(columns): '\(field)' in \(text)")
            }
        }
    }

    /// As the numbers change, the bar keeps its width and the same fields are shown, from the
    /// first frame (no rate yet) to the last (nothing left).
    @Test func keepsItsShapeFromOneFrameToTheNext() {
        let frames = (0...200).map { step in
            ProgressSnapshot(bytes: Int64(step) * 97_000_007, totalBytes: 19_400_001_400, files: step / 10, totalFiles: 20, seconds: Double(step + 1) / 10)
        }
        for columns in [60, 80, 120] {
            let texts = frames.map { ProgressBar.text($0, columns: columns) }
            let barWidths = Set(texts.map { $0.firstIndex(of: "]")!.utf16Offset(in: $0) })
            #expect(barWidths.count == 1, "\(columns): \(barWidths)")
            // Every field is padded to its widest (the time left is blank while not known), so
            // the line keeps its length: no field comes and goes.
            let lengths = Set(texts.map(\.count))
            #expect(lengths.count == 1, "\(columns): \(lengths)")
        }
    }

    @Test func showsEveryFieldAt80ColumnsAndTheTimeLeftAt60() {
        let state = Self.states[1]
        let wide = ProgressBar.text(state, columns: 80)
        for field in Self.fields(state) { #expect(wide.contains(field), "\(field) in \(wide)") }
        #expect(ProgressBar.text(state, columns: 60).hasSuffix(" left"))
        #expect(ProgressBar.text(state, columns: 60).count <= 59)
    }

    @Test func byteCountsUseTenthsOfTheLargestUnit() {
        #expect(ProgressBar.byteCount(0) == "0 B")
        #expect(ProgressBar.byteCount(999) == "999 B")
        #expect(ProgressBar.byteCount(1000) == "1.0 KB")
        #expect(ProgressBar.byteCount(999_949) == "999.9 KB")
        #expect(ProgressBar.byteCount(999_950) == "1.0 MB")
        #expect(ProgressBar.byteCount(43_000_000_000) == "43.0 GB")
    }
}
