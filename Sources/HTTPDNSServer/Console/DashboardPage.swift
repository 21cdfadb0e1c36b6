/// The operator's dashboard, `/` and `/dashboard` on the admin listener: one self-contained page (no CDN, no build
/// step, no third-party script) that reads `/stats.json` every second and shows rates from two readings.
///
/// Everything it writes into the page goes through `textContent`, never `innerHTML`, so no value the service
/// reports can become markup. The elements carrying the headline numbers have ids (`qps`, `hit-ratio`, `p50`,
/// `p99`, `connections`, `updated`) that the browser test reads.
enum DashboardPage {
    /// The page.
    static let html: [UInt8] = Array(
        #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>hostsctl serve</title>
        <style>
          body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #f6f7f9; }
          h1 { font-size: 1.3em; margin: 0 0 .2em; }
          h2 { font-size: 1em; margin: 1.4em 0 .4em; }
          .muted { color: #6b7280; }
          .cards { display: flex; flex-wrap: wrap; gap: .8em; }
          .card { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; padding: .7em 1em; min-width: 9em; }
          .card .value { font-size: 1.6em; font-variant-numeric: tabular-nums; }
          table { border-collapse: collapse; background: #fff; border: 1px solid #dde1e7; }
          th, td { padding: .3em .8em; text-align: right; font-variant-numeric: tabular-nums; }
          th:first-child, td:first-child { text-align: left; }
          thead th { background: #eef0f3; }
          tr + tr td { border-top: 1px solid #eef0f3; }
          svg { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; }
          #error { color: #b91c1c; }
        </style>
        </head>
        <body>
        <h1>hostsctl serve</h1>
        <div class="muted">updated <span id="updated">never</span> <span id="error"></span></div>
        <div class="cards">
          <div class="card"><div class="muted">queries / s</div><div class="value" id="qps">–</div></div>
          <div class="card"><div class="muted">cache hit ratio</div><div class="value" id="hit-ratio">–</div></div>
          <div class="card"><div class="muted">answer p50</div><div class="value" id="p50">–</div></div>
          <div class="card"><div class="muted">answer p99</div><div class="value" id="p99">–</div></div>
          <div class="card"><div class="muted">connections open</div><div class="value" id="connections">–</div></div>
          <div class="card"><div class="muted">waiting for upstreams</div><div class="value" id="in-flight">–</div></div>
        </div>
        <h2>Queries per second, last two minutes</h2>
        <svg id="history" width="600" height="90" viewBox="0 0 600 90" role="img" aria-label="queries per second">
          <polyline id="history-line" fill="none" stroke="#2563eb" stroke-width="2" points=""></polyline>
        </svg>
        <h2>By transport</h2>
        <table><thead><tr><th>transport</th><th>queries / s</th><th>total</th></tr></thead><tbody id="transports"></tbody></table>
        <h2>Answers by endpoint and status</h2>
        <table><thead><tr><th>endpoint</th><th>status</th><th>per second</th><th>total</th></tr></thead><tbody id="answers"></tbody></table>
        <h2>Answers by DNS outcome</h2>
        <table><thead><tr><th>rcode</th><th>per second</th><th>total</th></tr></thead><tbody id="outcomes"></tbody></table>
        <h2>Upstreams</h2>
        <table><thead><tr><th>source</th><th>answered</th><th>failed</th><th>mean time</th></tr></thead><tbody id="upstreams"></tbody></table>
        <h2>Turned away</h2>
        <table><thead><tr><th>limit</th><th>per second</th><th>total</th></tr></thead><tbody id="refusals"></tbody></table>
        <h2>Busiest names</h2>
        <table><thead><tr><th>name</th><th>share</th><th>requests (estimated)</th></tr></thead><tbody id="names"></tbody></table>
        <h2>Steering for one name</h2>
        <form id="steer-form"><input id="steer-name" placeholder="api.example.com" size="32" autocomplete="off">
          <button type="submit">show</button></form>
        <p class="muted" id="steer-note">The server's order of a cached name's addresses, and each client network's whose reports reorder it.</p>
        <table><thead><tr><th>address</th><th>rank</th><th>score</th><th>connect time</th></tr></thead><tbody id="steer-addresses"></tbody></table>
        <table><thead><tr><th>network</th><th>order</th></tr></thead><tbody id="steer-networks"></tbody></table>
        <p class="muted">The same numbers as <a href="/metrics">/metrics</a>, read from <a href="/stats.json">/stats.json</a>.</p>
        <script>
        "use strict";
        let previous = null;
        const history = [];
        const fixed = (value, digits) => value === null || value === undefined ? "–" : value.toFixed(digits);
        const rate = (now, before, seconds) => before === undefined || seconds <= 0 ? 0 : Math.max(0, now - before) / seconds;
        function fill(id, rows) {
          const body = document.getElementById(id);
          body.replaceChildren(...rows.map(cells => {
            const row = document.createElement("tr");
            for (const cell of cells) {
              const td = document.createElement("td");
              td.textContent = cell;
              row.appendChild(td);
            }
            return row;
          }));
        }
        function show(stats) {
          showSteering(stats.steering);
          // The server renders at most one reading a second: the same reading again changes nothing else.
          if (previous && stats.time <= previous.time) return;
          const seconds = previous ? stats.time - previous.time : 0;
          const total = Object.values(stats.queries).reduce((a, b) => a + b, 0);
          const before = previous ? Object.values(previous.queries).reduce((a, b) => a + b, 0) : undefined;
          const qps = rate(total, before, seconds);
          document.getElementById("qps").textContent = previous ? fixed(qps, 1) : "–";
          const ratio = stats.cache.hitRatio;
          document.getElementById("hit-ratio").textContent = ratio === null || ratio === undefined ? "–" : fixed(ratio * 100, 1) + " %";
          const ms = value => value === null || value === undefined ? "–" : fixed(value, 2) + " ms";
          document.getElementById("p50").textContent = ms(stats.latency.p50Milliseconds);
          document.getElementById("p99").textContent = ms(stats.latency.p99Milliseconds);
          document.getElementById("connections").textContent = String(stats.connectionsOpen);
          document.getElementById("in-flight").textContent = String(stats.upstreamInFlight);
          document.getElementById("updated").textContent = new Date(stats.time * 1000).toLocaleTimeString();
          fill("transports", Object.keys(stats.queries).sort().map(name => [
            name, fixed(rate(stats.queries[name], previous ? previous.queries[name] : undefined, seconds), 1),
            String(stats.queries[name])]));
          const earlier = {};
          for (const a of previous ? previous.answers : []) earlier[a.endpoint + " " + a.status] = a.count;
          fill("answers", stats.answers.map(a => [
            a.endpoint, a.status, fixed(rate(a.count, earlier[a.endpoint + " " + a.status], seconds), 1), String(a.count)]));
          fill("outcomes", Object.keys(stats.outcomes || {}).sort().map(code => [
            code, fixed(rate(stats.outcomes[code], previous && previous.outcomes ? previous.outcomes[code] : undefined, seconds), 1),
            String(stats.outcomes[code])]));
          fill("names", (stats.busiestNames || []).map(n => [n.name, fixed(n.share * 100, 1) + " %", fixed(n.requests, 0)]));
          fill("upstreams", stats.upstreams.map(u => [u.source, String(u.answered), String(u.failed), ms(u.meanMilliseconds)]));
          const names = { rateLimited: "rate limited", connectionsRefused: "connections refused",
            upstreamRefused: "upstream queue full", udpDropped: "UDP dropped" };
          fill("refusals", Object.keys(names).map(key => [
            names[key], fixed(rate(stats.refusals[key], previous ? previous.refusals[key] : undefined, seconds), 1),
            String(stats.refusals[key])]));
          if (previous) {
            history.push(qps);
            if (history.length > 120) history.shift();
            const top = Math.max(1, ...history);
            document.getElementById("history-line").setAttribute("points",
              history.map((value, index) => (index * 5) + "," + (88 - value / top * 84).toFixed(1)).join(" "));
          }
          previous = stats;
        }
        function showSteering(steering) {
          const ms = value => value === null || value === undefined ? "–" : fixed(value, 2) + " ms";
          fill("steer-addresses", steering ? steering.addresses.map(a => [a.ip, String(a.rank), fixed(a.score, 1),
            ms(a.latencyMilliseconds)]) : []);
          fill("steer-networks", steering ? steering.networks.map(n => [n.network, n.order.join(", ")]) : []);
          if (steering) {
            document.getElementById("steer-note").textContent = steering.addresses.length === 0
              ? steering.host + " is not in the cache."
              : steering.host + ": " + steering.networks.length + " reporting networks.";
          }
        }
        let steerName = "";
        document.getElementById("steer-form").addEventListener("submit", event => {
          event.preventDefault();
          steerName = document.getElementById("steer-name").value.trim();
          poll();
        });
        async function poll() {
          try {
            const target = "/stats.json" + (steerName ? "?name=" + encodeURIComponent(steerName) : "");
            const response = await fetch(target, { cache: "no-store" });
            if (!response.ok) throw new Error("HTTP " + response.status + " " + (await response.text()));
            const stats = await response.json();
            show(stats);
            document.getElementById("error").textContent = "";
          } catch (error) {
            document.getElementById("error").textContent = "(cannot read /stats.json: " + error.message + ")";
          }
        }
        poll();
        setInterval(poll, 1000);
        </script>
        </body>
        </html>
        """#.utf8)
}
