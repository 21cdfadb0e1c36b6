#!/usr/bin/env python3
"""Loads the dashboard of a running `hostsctl serve` in headless Chromium and reports what the page shows.

  dashboard_probe.py URL [--readings N] [--gap SECONDS] [--screenshot PATH]

Drives the browser over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages ended by a NUL byte,
the browser reading fd 3 and writing fd 4), so nothing but Chromium and Python's standard library is needed. Waits
until the page has shown a reading, then takes N readings GAP seconds apart (each: the headline numbers and the
transports table, as rendered), optionally saves a screenshot, and prints {"readings": [...]} as JSON.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

READ_PAGE = """(() => {
  const text = id => document.getElementById(id).textContent;
  const rows = [...document.querySelectorAll('#transports tr')].map(tr => [...tr.children].map(td => td.textContent));
  return JSON.stringify({qps: text('qps'), hitRatio: text('hit-ratio'), p50: text('p50'), p99: text('p99'),
                         connections: text('connections'), updated: text('updated'), error: text('error'),
                         transports: rows});
})()"""


class Browser:
    def __init__(self, profile):
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def wire():
            # Through high numbers first, so that neither pipe end is overwritten on its way to 3 or 4; dup2 onto a
            # number clears close-on-exec, which the set_inheritable calls make sure of.
            reader, writer = os.dup(to_browser_read), os.dup(from_browser_write)
            high_reader, high_writer = os.dup2(reader, 200), os.dup2(writer, 201)
            os.dup2(high_reader, 3)
            os.dup2(high_writer, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            sys.exit("chromium is not installed (scripts/install-deps.sh test installs it)")
        # --no-sandbox: the tests may run as root, where Chromium's sandbox cannot start. The page is our own.
        self.process = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--no-default-browser-check", "--user-data-dir=" + profile, "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=open(os.environ.get("DASHBOARD_PROBE_LOG", os.devnull), "w"))
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.next_id = 0
        self.buffer = b""

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_browser, 65536)
                if not chunk:
                    raise RuntimeError("the browser closed its pipe")
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        raise TimeoutError(method)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--readings", type=int, default=2)
    parser.add_argument("--gap", type=float, default=2.5)
    parser.add_argument("--screenshot")
    parser.add_argument("--timeout", type=float, default=30)
    options = parser.parse_args()
    profile = tempfile.mkdtemp(prefix="hostsctl-dashboard-")
    browser = Browser(profile)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": 1000, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
        browser.call("Page.navigate", {"url": options.url}, session)

        def read():
            value = browser.call("Runtime.evaluate", {"expression": READ_PAGE, "returnByValue": True}, session)
            if "value" not in value.get("result", {}):
                raise RuntimeError("the page is not there yet")  # still loading: the elements do not exist
            return json.loads(value["result"]["value"])

        deadline = time.monotonic() + options.timeout
        while True:
            try:
                page = read()
                if page["updated"] != "never" and page["qps"] != "\u2013":
                    break
            except RuntimeError:
                pass
            if time.monotonic() > deadline:
                sys.exit("the page showed no reading in time")
            time.sleep(0.2)
        readings = [page]
        for _ in range(options.readings - 1):
            time.sleep(options.gap)
            readings.append(read())
        if options.screenshot:
            shot = browser.call("Page.captureScreenshot", {"format": "png"}, session)
            with open(options.screenshot, "wb") as handle:
                handle.write(base64.b64decode(shot["data"]))
        print(json.dumps({"readings": readings}))
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
