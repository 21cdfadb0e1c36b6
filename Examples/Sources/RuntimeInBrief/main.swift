// A DocC sample (Sources/HTTPDNSURLProtocol/HTTPDNSURLProtocol.docc), compiled by CI; ReadmeSampleTests keeps the
// texts equal.
import HTTPDNSURLProtocol

let httpDNS = try HTTPDNSRuntime.start(configurationFile: "Config/hostsctl.json")
// ... URLSession.shared and every session made from .default now use the fastest address ...
await httpDNS.shutdown()   // saves the cache
