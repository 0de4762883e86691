"""The report in a real browser: headless Chromium opens the demo-sized report served on
loopback, visits every page it links to, and finds no console error, no broken page link or
anchor, no malformed article link and no image that failed to load; screenshots of the index
and of a benchmark page are saved under the test's temp dir. A deliberately broken copy shows
the crawl does catch each kind of fault."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.report import read
from pipelines.report.run import Config, run
from tests.report.browser import browser, crawl, screenshot, serve

pytestmark = [pytest.mark.ray, pytest.mark.spark]


@pytest.fixture(scope="module")
def site(demo_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run(Config(root=demo_root, out=str(out)))
    return out


@pytest.fixture(scope="module")
def chromium():
    with browser() as driver:
        yield driver


def test_every_page_loads_clean_and_every_link_resolves(demo_root, site, chromium, tmp_path):
    with serve(site) as base:
        found = crawl(chromium, base)
        shots = [
            screenshot(chromium, base + "index.html", tmp_path / "index.png"),
            screenshot(chromium, base + "daily_oracle.html", tmp_path / "daily_oracle.png"),
        ]
    assert found.problems == []
    pages = {p.rsplit("/", 1)[-1] for p in found.pages}
    expected = {f"{n}.html" for n in read.discover_benchmarks(demo_root)} | {"index.html", "evaluation.html"}
    assert pages == expected
    assert found.external > 0  # the sampled items' articles link to their publishers
    for shot in shots:
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, shot
    print(f"screenshots: {', '.join(map(str, shots))}")


def test_the_crawl_catches_broken_pages(site, chromium, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(site, broken)
    (broken / "style.css").unlink()
    index = broken / "index.html"
    index.write_text(
        index.read_text().replace(
            "</main>",
            '<a href="missing.html">gone</a><a href="evaluation.html#nowhere">anchor</a>'
            '<a href="htp:/bad url">bad</a><img src="none.png" alt="x">'
            "<script>undefinedFunction()</script></main>",
        )
    )
    with serve(broken) as base:
        found = crawl(chromium, base)
    text = "\n".join(found.problems)
    assert "missing.html (no such page)" in text
    assert "evaluation.html#nowhere (no element with id nowhere)" in text
    assert "htp:/bad url" in text
    assert "image none.png" in text
    assert "undefinedFunction" in text and "style.css" in text
