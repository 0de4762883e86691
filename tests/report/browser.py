"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium, for the
report's browser test: open every page of a site served on loopback, collect console errors,
check every link and image, take screenshots."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urlparse

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def binaries() -> tuple[str, str]:
    """Paths of chromium and chromedriver; a clear error when the packages are missing."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        raise RuntimeError(
            "headless Chromium is missing: apt-get install -y chromium chromium-driver (make test does)"
        )
    return chromium, driver


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """A static HTTP server of ``directory`` on 127.0.0.1 (a free port); yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the test reads statuses, not the access log
        pass


@contextlib.contextmanager
def browser() -> Iterator:
    """A headless Chromium session with a fresh profile, console logging on."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
        try:
            yield driver
        finally:
            driver.quit()


@dataclass
class Findings:
    """What a crawl of a site found wrong, per page."""

    console: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)
    bad_external: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    external: int = 0

    @property
    def problems(self) -> list[str]:
        return self.console + self.broken_links + self.bad_external + self.broken_images


LINKS = "return Array.from(document.querySelectorAll('a[href]')).map(a => [a.getAttribute('href'), a.href]);"
IMAGES = (
    "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
    ".map(i => i.getAttribute('src'));"
)
IDS = "return Array.from(document.querySelectorAll('[id]')).map(e => e.id);"


def crawl(driver, base: str, start: str = "index.html") -> Findings:
    """Open ``start`` and every page it links to on the same server; on each: console messages
    of level SEVERE, links to pages or anchors that do not exist, external links that are not
    absolute http(s) URLs, images that did not load."""
    found = Findings()
    ids: dict[str, set[str]] = {}
    links: list[tuple[str, str, str]] = []  # (page, href as written, resolved)
    queue, seen = [base + start], set()
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        driver.get(url)
        found.pages.append(url)
        status = driver.execute_script("return document.title")
        if "Error response" in status:
            found.broken_links.append(f"{url}: {status}")
            continue
        ids[url] = set(driver.execute_script(IDS))
        found.broken_images += [f"{url}: image {src}" for src in driver.execute_script(IMAGES)]
        found.console += [
            f"{url}: {e['message']}" for e in driver.get_log("browser") if e["level"] == "SEVERE"
        ]
        for written, resolved in driver.execute_script(LINKS):
            links.append((url, written, resolved))
            target, _ = urldefrag(resolved)
            if resolved.startswith(base) and target not in seen and target.endswith(".html"):
                queue.append(target)
    for url, written, resolved in links:
        target, anchor = urldefrag(resolved)
        if resolved.startswith(base):
            if target not in ids:
                found.broken_links.append(f"{url}: {written} (no such page)")
            elif anchor and anchor not in ids[target]:
                found.broken_links.append(f"{url}: {written} (no element with id {anchor})")
        else:
            found.external += 1
            parsed = urlparse(resolved)
            if parsed.scheme not in ("http", "https") or not parsed.netloc or " " in written:
                found.bad_external.append(f"{url}: {written}")
    return found


def screenshot(driver, url: str, path: Path, width: int = 1400) -> Path:
    """A PNG of the whole page at ``url`` (the window grown to the page's height)."""
    driver.get(url)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height, 600), 8000))
    driver.save_screenshot(str(path))
    driver.set_window_size(width, 1000)
    return path
