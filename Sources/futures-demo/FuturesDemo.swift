// futures-demo: the main job of swift-futures, built on the library alone.
//
//     futures-demo [tour] [--directory PATH]             the person-and-picture scenario (default)
//     futures-demo hash [--jobs N] [--timeout S] PATH...  SHA-256 of files, as sha256sum prints them
//     futures-demo hash --check FILE                     checks them as `sha256sum -c` does
import ArgumentParser
import Foundation

@main
struct FuturesDemo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "futures-demo",
        abstract: "Demonstrations of swift-futures on real work.",
        subcommands: [Tour.self, Hash.self],
        defaultSubcommand: Tour.self
    )

    /// Parses the arguments and runs the command. Exit statuses: what the command says (0 when it
    /// succeeds), 0 for `--help`, and 2 for arguments it cannot use (with the usage), as the
    /// command-line tools it stands beside do.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let code as ExitCode {
            Foundation.exit(code.rawValue)
        } catch {
            // Help (asked for, or shown for a command that needs a subcommand), and bad arguments.
            if exitCode(for: error) == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            Foundation.exit(2)
        }
    }
}
