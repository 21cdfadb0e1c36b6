// A README sample, compiled by CI (`swift build --package-path Examples`); ReadmeSampleTests keeps the texts equal.
import HTTPDNS

let file = try HostsFile(contentsOf: "Config/hosts")       // bad lines are skipped and listed in file.diagnostics
for problem in file.diagnostics { print(problem) }          // Config/hosts:12:9: error: invalid host name: ...
let overrides = HostOverrides(file: file, ttl: 60)

overrides.set([IPAddress("192.0.2.44")!], for: try HostPattern("api.example.com"))   // wins over the file
overrides.remove(try HostPattern("api.example.com"))
overrides.replaceFile(try HostsFile(contentsOf: "Config/hosts"))                     // after an edit

if let answer = overrides.resolve(try HostName("img.cdn.example.com"), family: .any) {
    print(answer.addresses)                                 // source "override"
}
