"""A headless Chromium driven over the DevTools protocol (websockets), for UI tests.

Only what the tests need: open a page, wait until its text holds some words, click an element
by its visible text, and save a screenshot. No browser download: Debian's `chromium`.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from websockets.sync.client import ClientConnection, connect

from tests.dagster_ui import stop

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,900",
    "--remote-debugging-port=0",
]


class Page:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    def send(self, method: str, **params) -> dict:
        message_id = next(self.ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def wait_for(self, *words: str, absent: tuple[str, ...] = (), timeout: float = 60) -> str:
        """The page's text once it holds every word and none of `absent` (the UI renders
        asynchronously)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            missing = [w for w in words if w not in text] + [w for w in absent if w in text]
            if not missing:
                return text
            assert time.monotonic() < deadline, (
                f"waiting for {missing}; the page shows:\n{text[:3000]}"
            )
            time.sleep(0.5)

    def wait_until(self, expression: str, timeout: float = 60):
        """The value of a JavaScript expression once it is truthy."""
        deadline = time.monotonic() + timeout
        while not (value := self.evaluate(expression)):
            assert time.monotonic() < deadline, f"{expression} stayed falsy:\n{self.text()[:2000]}"
            time.sleep(0.5)
        return value

    def click_text(self, text: str, selector: str = "button, a, [role=tab], [role=button]") -> None:
        """Click the innermost element matching `selector` whose visible text is `text`."""
        clicked = self.evaluate(
            f"""(() => {{
              const all = [...document.querySelectorAll({json.dumps(selector)})];
              const el = all.find(e => e.innerText && e.innerText.trim() === {json.dumps(text)});
              if (!el) return false;
              el.click();
              return true;
            }})()"""
        )
        assert clicked, f"nothing to click named {text!r}; the page shows:\n{self.text()[:2000]}"

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium_page(profile: Path) -> Iterator[Page]:
    """A fresh headless Chromium (its own profile folder) with one blank page."""
    proc = subprocess.Popen(
        ["chromium", *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.2)
        port = port_file.read_text().split()[0]
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        with connect(ws_url, max_size=64 * 2**20, open_timeout=20) as ws:
            page = Page(ws)
            page.send("Page.enable")
            yield page
    finally:
        stop(proc)
