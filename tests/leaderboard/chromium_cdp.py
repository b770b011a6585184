"""A small Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (fd 3 in, fd 4 out, NUL-separated
JSON), so headless Chromium can be driven with real mouse clicks and typing without a websocket library."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in (os.environ.get("LFB_CHROMIUM"), *CANDIDATES):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _high(fd: int) -> int:
    """A close-on-exec copy of ``fd`` numbered 10 or above (so that fds 3 and 4 can be set up in the child)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Browser:
    """Headless Chromium with one page, driven over the DevTools pipe."""

    def __init__(self, executable: str, profile_dir: Path, width: int = 1400, height: int = 1000) -> None:
        to_child_r, to_child_w = (_high(fd) for fd in os.pipe())
        from_child_r, from_child_w = (_high(fd) for fd in os.pipe())

        def wire() -> None:  # runs in the child before exec: the pipe ends become fds 3 and 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
             f"--user-data-dir={profile_dir}", f"--window-size={width},{height}"],
            pass_fds=(3, 4), preexec_fn=wire,  # noqa: PLW1509 - the tests start no threads around this stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._out, self._in = to_child_w, from_child_r
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime"):
            self.page(f"{domain}.enable")
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # -- protocol --------------------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._out, json.dumps(message).encode() + b"\0")

    def _receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium over the DevTools pipe")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, *, session: str | None = None, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._send(message)
        while True:
            reply = self._receive(timeout)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, session=self.session, **params)

    def wait_for_event(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        for i, event in enumerate(self.events):
            if event.get("method") == name:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            event = self._receive(deadline - time.monotonic())
            if event.get("method") == name:
                return event
            self.events.append(event)
        raise TimeoutError(f"no {name} event within {timeout} s")

    # -- page actions ----------------------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.events.clear()
        self.page("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real left click (mouse pressed and released) at the centre of the first element matching ``selector``."""
        box = self.evaluate(f"(() => {{ const el = document.querySelector({json.dumps(selector)}); "
                            "el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect(); "
                            "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.page("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type_text(self, text: str) -> None:
        self.page("Input.insertText", text=text)

    def screenshot(self, path: Path) -> Path:
        data = self.page("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (TimeoutError, ConnectionError, RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
