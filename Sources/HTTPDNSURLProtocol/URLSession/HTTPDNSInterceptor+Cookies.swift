#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Foundation
import NIOHTTP1

// Cookies on the URL protocol's hops: the stored ones added to each request, the ones an answer sets stored.
extension HTTPDNSInterceptor {
    /// Adds the stored cookies for `url` that the request does not carry yet. URLSession itself puts the session's
    /// cookies on the request it hands to the protocol (the first hop); redirect hops get none from it. Cookies the
    /// request already names (from URLSession or set by the application) are not added again, so each goes out once.
    static func addCookies(to request: inout URLRequest, for url: URL, from storage: HTTPCookieStorage?) {
        guard let storage, request.httpShouldHandleCookies,
            var cookies = storage.cookies(for: url), !cookies.isEmpty
        else { return }
        // A Secure cookie never goes over plain HTTP, whatever the storage returns.
        if url.scheme?.lowercased() != "https" { cookies.removeAll(where: \.isSecure) }
        let existing = request.value(forHTTPHeaderField: "Cookie")
        let present = Set(
            (existing ?? "").split(separator: ";").compactMap { pair in
                pair.split(separator: "=", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) }
            })
        let missing = cookies.filter { !present.contains($0.name) }
        guard !missing.isEmpty, let stored = HTTPCookie.requestHeaderFields(with: missing)["Cookie"] else { return }
        request.setValue(existing.map { "\($0); \(stored)" } ?? stored, forHTTPHeaderField: "Cookie")
    }

    /// Stores the cookies `headers` set for `url` in `storage`, when `request` handles cookies.
    ///
    /// A storage may write its file on every change, which must not happen on an event loop (where the URL
    /// protocol runs its loads), so the cookies are stored from the cooperative pool: a hop there and back, only
    /// for an answer that sets cookies.
    static func storeCookies(
        from headers: HTTPHeaders, for url: URL, request: URLRequest, in storage: HTTPCookieStorage?
    ) async {
        guard let storage, request.httpShouldHandleCookies else { return }
        var cookies: [HTTPCookie] = []
        for value in headers["Set-Cookie"] {
            cookies += HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": value], for: url)
        }
        guard !cookies.isEmpty else { return }
        let mainDocument = request.mainDocumentURL ?? url
        await withTaskExecutorPreference(globalConcurrentExecutor) {
            storage.setCookies(cookies, for: url, mainDocumentURL: mainDocument)
        }
    }
}
