import Foundation

/// The target named by `HTTPDNS_FUZZ_TARGET`, for libFuzzer's own entry point (`LLVMFuzzerTestOneInput` in
/// `Tests/FuzzDriver`): read once, and a name that is no target stops the run at its first input.
enum FuzzEntry {
    static let target: String = {
        let target = ProcessInfo.processInfo.environment["HTTPDNS_FUZZ_TARGET"] ?? ""
        let names = FuzzTargets.names + ServerFuzzTargets.names
        precondition(names.contains(target), "set HTTPDNS_FUZZ_TARGET to one of \(names.joined(separator: ", "))")
        return target
    }()
}

/// One input for the target named by `HTTPDNS_FUZZ_TARGET`, from libFuzzer's own entry point.
@_cdecl("httpdns_fuzz_one")
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    if !FuzzTargets.run(FuzzEntry.target, bytes) { _ = ServerFuzzTargets.run(FuzzEntry.target, bytes) }
    return 0
}
