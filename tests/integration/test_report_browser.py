"""report.html with its figures, opened in a real headless browser (Debian's chromium).

One chromium per page, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, nothing
listening): it loads the page, reports every uncaught exception, console error and browser log error, answers
which figures are in the DOM and how large they are drawn, and takes a screenshot. The browser runs in its own
process group, which is killed at the end; its profile folder is removed.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clustereval.report import build_view, html, plots
from tests.unit.test_report_plots import full_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (apt-get install chromium)"),
]
pytest.importorskip("matplotlib")

WIDTH, HEIGHT, SHOT_SCALE = 1400, 3000, 0.25
TIMEOUT_S = 60.0


@dataclass
class Loaded:
    """What the browser saw of a page."""

    errors: list[str] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)
    png: bytes = b""


class DevTools:
    """The DevTools protocol over chromium's pipe: fd 3 carries our commands, fd 4 its answers, NUL-separated."""

    def __init__(self, to_browser: int, from_browser: int) -> None:
        self.to_browser, self.from_browser = to_browser, from_browser
        self.buffer, self.events, self.next_id = b"", [], 0

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params, **({"sessionId": session} if session
                                                                               else {})}
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result") or {}
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        while True:
            event = self.receive()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.from_browser], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.from_browser, 1 << 20) if ready else b""
            if not chunk:
                raise TimeoutError("chromium closed its DevTools pipe or did not answer in time")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        method, params = event.get("method"), event.get("params") or {}
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            out.append("exception: " + str((details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append("console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                      for a in params.get("args") or []))
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            out.append("log: " + str(params["entry"].get("text")))
    return out


FIGURES_JS = """JSON.stringify(Array.from(document.querySelectorAll('figure.plot > svg')).map(s => {
  const r = s.getBoundingClientRect(); return {id: s.id, width: r.width, height: r.height,
  texts: s.querySelectorAll('text').length, images: s.querySelectorAll('image').length}; }))"""


def open_page(page: Path) -> Loaded:
    """Load ``page`` in headless chromium; the browser and its profile are gone when this returns."""
    profile = tempfile.mkdtemp(prefix="clustereval-chromium-")
    commands_r, commands_w = os.pipe()
    answers_r, answers_w = os.pipe()

    # close_fds=False: Python's own descriptors are not inheritable anyway, and the ones dup2 puts at 3 and 4
    # must survive the exec (pass_fds would want 3 and 4 open in this process too).
    def pipes_at_3_and_4() -> None:
        # Through fds above 10 first, so that neither pipe end is overwritten by the other's dup2.
        high_r, high_w = fcntl.fcntl(commands_r, fcntl.F_DUPFD, 10), fcntl.fcntl(answers_w, fcntl.F_DUPFD, 10)
        os.dup2(high_r, 3)
        os.dup2(high_w, 4)
        os.close(high_r)
        os.close(high_w)

    browser = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
         f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}", "--no-first-run",
         "--disable-background-networking", "--disable-extensions", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=pipes_at_3_and_4, close_fds=False, start_new_session=True)
    os.close(commands_r)
    os.close(answers_w)
    tools, loaded = DevTools(commands_w, answers_r), Loaded()
    try:
        target = tools.send("Target.createTarget", url="about:blank")["targetId"]
        session = tools.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            tools.send(f"{domain}.enable", session)
        tools.send("Emulation.setDeviceMetricsOverride", session, width=WIDTH, height=HEIGHT, deviceScaleFactor=1,
                   mobile=False)
        tools.send("Page.navigate", session, url=page.resolve().as_uri())
        tools.wait_for("Page.loadEventFired")
        answer = tools.send("Runtime.evaluate", session, expression=FIGURES_JS, returnByValue=True)
        loaded.figures = json.loads(answer["result"]["value"])
        shot = tools.send("Page.captureScreenshot", session, format="png",
                          clip={"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT, "scale": SHOT_SCALE})
        loaded.png = base64.b64decode(shot["data"])
        tools.send("Runtime.evaluate", session, expression="1")  # drains the events the page raised meanwhile
        loaded.errors = _errors(tools.events)
        tools.send("Browser.close")
    finally:
        os.close(commands_w)
        os.close(answers_r)
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(browser.pid, signal.SIGKILL)  # the renderer, zygote and GPU helpers share the group
        except ProcessLookupError:
            pass
        browser.wait()
        shutil.rmtree(profile, ignore_errors=True)
    assert not _group_alive(browser.pid), "chromium left processes behind"
    return loaded


def _group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def png_colours(png: bytes) -> set[bytes]:
    """The distinct pixel colours of an 8-bit RGB(A) PNG (what chromium writes), decoded with zlib alone."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    offset, chunks, width = 8, [], 0
    while offset < len(png):
        length, kind = struct.unpack(">I4s", png[offset:offset + 8])
        body = png[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            width, _, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"unexpected PNG format (depth {depth}, colour type {colour})"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
        offset += 12 + length
    raw, stride = zlib.decompress(b"".join(chunks)), width * channels
    previous, colours = bytearray(stride), set()
    for start in range(0, len(raw), stride + 1):
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        colours.update(bytes(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return colours


def report_page(run_dir: Path) -> str:
    """report.html as html.render writes it (the figures section before the per-check details)."""
    return html.render(build_view(run_dir))


def test_report_with_figures_renders_without_errors(tmp_path: Path) -> None:
    run_dir = full_run(tmp_path, samples=3000)
    expected = [f.svg.split('"', 2)[1] for members in plots.figures(build_view(run_dir)).values() for f in members]
    page = run_dir / "report.html"
    page.write_text(report_page(run_dir), encoding="utf-8")
    loaded = open_page(page)
    (tmp_path / "report.png").write_bytes(loaded.png)
    assert loaded.errors == []
    assert [f["id"] for f in loaded.figures] == expected and len(expected) == 5
    for figure in loaded.figures:
        assert figure["width"] > 200 and figure["height"] > 80, figure  # laid out, not collapsed
        assert figure["texts"] > 3, figure  # titles and tick labels stayed text
    assert len(png_colours(loaded.png)) > 50  # not blank: the plots' colours are in the picture


def test_a_page_with_a_script_error_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><p>broken</p><script>console.error('said so');"
                    "window.noSuchFunction();</script></body></html>", encoding="utf-8")
    loaded = open_page(page)
    assert any("noSuchFunction" in e and e.startswith("exception:") for e in loaded.errors), loaded.errors
    assert any(e == "console.error: said so" for e in loaded.errors), loaded.errors
    assert loaded.figures == []
    assert len(png_colours(loaded.png)) < 50  # a page of one word is nearly blank: the colour count can tell
