import ArgumentParser
import HostsCTL

/// The `hostsctl` executable: everything lives in the `HostsCTL` library so tests can run commands.
@main
enum HostsCTLMain {
    static func main() async {
        await HostsCTLCommand.main()
    }
}
