/// The progress bar's text. Public, so that the tests can check its layout at every width without
/// a terminal (an executable's module is compiled for testing in debug builds only).
public enum ProgressBar {
    /// The progress bar for a terminal `columns` wide, in at most `columns - 1` characters (a line
    /// that reaches the last column may wrap, and would then not be erased by the next one):
    ///
    /// `[#########...........]  37%  1.2 GB of 3.4 GB  12/40 files  350.0 MB/s  0:07 left`
    ///
    /// Where it does not all fit, fields are left out whole, the rate first, then the files, then
    /// the bytes, then the time left; the bar itself is 10 to 30 characters wide. The numbers are
    /// padded to their widest and the time left keeps its room while it is not known, so the line
    /// keeps its shape from one frame to the next.
    public static func text(_ progress: ProgressSnapshot, columns: Int) -> String {
        let limit = max(columns - 1, 0)
        // At most 1: a file can grow while it is read.
        let fraction = min(1, progress.totalBytes > 0
            ? Double(progress.bytes) / Double(progress.totalBytes)
            : Double(progress.files) / Double(max(progress.totalFiles, 1)))
        let rate = progress.seconds > 0 ? Double(progress.bytes) / progress.seconds : 0
        let percent = "\(Int(fraction * 100))%"
        let percentField = String(repeating: " ", count: max(0, 4 - percent.count)) + percent
        var left: String?
        if rate > 0, progress.bytes < progress.totalBytes {
            let seconds = Int(min((Double(progress.totalBytes - progress.bytes) / rate).rounded(.up), 359_999_999))
            let secondsText = seconds % 60 < 10 ? "0\(seconds % 60)" : "\(seconds % 60)"
            left = "\(seconds / 60):\(secondsText) left"
        }
        // In the order shown; `priority` is the order in which they are kept (0 kept longest). The
        // numbers that change are padded to their widest, so that the bar keeps its width and no
        // field comes and goes from one frame to the next.
        let totalFiles = "\(progress.totalFiles)"
        var fields: [(text: String, priority: Int)] = [(percentField, 0)]
        fields.append((padded(byteCount(progress.bytes), to: 8) + " of \(byteCount(progress.totalBytes))", 2))
        fields.append((padded("\(progress.files)", to: totalFiles.count) + "/\(totalFiles) files", 3))
        fields.append((padded("\(byteCount(Int64(rate)))/s", to: 10), 4))
        // Blank while not known (at the start, and at the end), but its room is kept.
        fields.append((padded(left ?? "", to: 10), 1))

        let minimumBar = 10, maximumBar = 30
        // Each field after the bar takes two spaces before it; the bar takes its brackets.
        func length(_ kept: [(text: String, priority: Int)]) -> Int {
            kept.reduce(0) { $0 + 2 + $1.text.count } - 1  // the percent field pads itself to 4
        }
        var kept = fields
        while kept.count > 1, minimumBar + 2 + length(kept) > limit {
            let dropped = kept.max { $0.priority < $1.priority }!.priority
            kept.removeAll { $0.priority == dropped }
        }
        let barWidth = min(maximumBar, limit - 2 - length(kept))
        guard barWidth >= 1 else { return String(percentField.prefix(limit)) }
        let filled = min(barWidth, Int(fraction * Double(barWidth)))
        var text = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: barWidth - filled) + "]"
        for (index, field) in kept.enumerated() {
            text += (index == 0 ? " " : "  ") + field.text
        }
        return text
    }

    /// `text` after as many spaces as make it `width` characters long.
    static func padded(_ text: String, to width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    public static func byteCount(_ bytes: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"]
        guard bytes >= 1000 else { return "\(bytes) B" }
        // Tenths of the unit, in integers: no format strings.
        var value = Double(bytes)
        var unit = 0
        while value >= 999.95, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
    }
}

/// Where the run is, for the progress bar.
public struct ProgressSnapshot: Sendable {
    public var bytes: Int64
    public var totalBytes: Int64
    public var files: Int
    public var totalFiles: Int
    /// Since the run started.
    public var seconds: Double

    public init(bytes: Int64, totalBytes: Int64, files: Int, totalFiles: Int, seconds: Double) {
        self.bytes = bytes
        self.totalBytes = totalBytes
        self.files = files
        self.totalFiles = totalFiles
        self.seconds = seconds
    }
}
