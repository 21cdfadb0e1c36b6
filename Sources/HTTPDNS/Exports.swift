// The resolver's vocabulary and its upstreams come with `import HTTPDNS`: adopters import one module.
@_exported public import HTTPDNSCAres
@_exported public import HTTPDNSClients
@_exported public import HTTPDNSCore
