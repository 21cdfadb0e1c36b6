// httpdns-fuzz: the fuzz targets of `FuzzTargets` and `ServerFuzzTargets` behind one binary.
//
// Built with libFuzzer (scripts/fuzz.sh: `-sanitize=fuzzer,address -DFUZZING`), the target is named by the
// HTTPDNS_FUZZ_TARGET environment variable and libFuzzer's driver, started from this program's own entry point
// (SwiftPM gives every executable its own `main`), runs it:
//   HTTPDNS_FUZZ_TARGET=doh-wire .build-fuzz/release/httpdns-fuzz -runs=10000000 Tests/Fuzz/Corpus/doh-wire
// Built normally, it replays files (the committed corpus, or a crash libFuzzer saved):
//   httpdns-fuzz TARGET FILE_OR_DIRECTORY...
// Exit status: 0 when every input ran, 2 for bad arguments; a failing input traps.

import FuzzDriver
import Foundation
import HTTPDNS
import HTTPDNSServer

/// Every target of both modules, by name.
let names = FuzzTargets.names + ServerFuzzTargets.names

/// Runs `target` on `bytes` in whichever module has it.
func run(_ target: String, _ bytes: [UInt8]) {
    if !FuzzTargets.run(target, bytes) { _ = ServerFuzzTargets.run(target, bytes) }
}

#if FUZZING
    let target = ProcessInfo.processInfo.environment["HTTPDNS_FUZZ_TARGET"] ?? ""
    guard names.contains(target) else {
        FileHandle.standardError.write(
            Data("set HTTPDNS_FUZZ_TARGET to one of \(names.joined(separator: ", "))\n".utf8))
        exit(2)
    }
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    let status = httpdns_fuzz_run_driver(&argc, &argv) { start, count in
        let bytes = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
        run(target, bytes)
        return 0
    }
    exit(status)
#else
    let arguments = CommandLine.arguments.dropFirst()
    guard let target = arguments.first, names.contains(target), arguments.count > 1 else {
        FileHandle.standardError.write(
            Data("usage: httpdns-fuzz \(names.joined(separator: "|")) FILE_OR_DIRECTORY...\n".utf8))
        exit(2)
    }
    var files: [String] = []
    for path in arguments.dropFirst() {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            FileHandle.standardError.write(Data("no such file: \(path)\n".utf8))
            exit(2)
        }
        if isDirectory.boolValue {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            files += entries.sorted().map { "\(path)/\($0)" }
        } else {
            files.append(path)
        }
    }
    for file in files {
        let bytes = FileManager.default.contents(atPath: file).map { Array($0) } ?? []
        run(target, bytes)
    }
    print("\(target): \(files.count) inputs ran")
#endif
