import ArgumentParser
import HostsCTLCommands

/// The `hostsctl` executable: everything lives in the `HostsCTLCommands` library so tests can run commands.
@main
enum HostsCTLMain {
    static func main() async {
        await HostsCTLCommand.main()
    }
}
