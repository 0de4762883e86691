"""The labelled extraction check: each extractor against hand-labelled real pages.

    python -m bench.extraction_check [--extractors hybrid,trafilatura,newsplease]

The pages are records of the sample WARCs (``$AUGURY_SHARED_DATA/warc``) listed with their title,
publish day and body paragraphs in ``tests/fixtures/news_labels/labels.json`` (README beside it).
Every page goes through the job's own per-record path (``udfs.news_extract.process_candidate``,
with no minimum length), so the title, date and text scored are what ``corpus/articles`` would
hold. Prints one line per extractor: title exact match, title token F1, same-UTC-day date, body
token F1 and mean seconds per page (one core, this machine), then the JSON of the same figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

from udfs import news_extract as ne
from udfs.extraction_check import FIELDS, Label, mean_scores, reference_body, score
from udfs.warc import HeaderFilter, scan_file

LABELS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "news_labels" / "labels.json"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # fixed, so "today" never collides with a page date


def shared_data() -> Path:
    return Path(os.environ.get("AUGURY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def labelled_pages(data: Path | None = None) -> list[tuple[Label, dict[str, Any], str]]:
    """``(label, scan row, reference body)`` of every labelled page."""
    labels = [Label.of(d) for d in json.loads(LABELS.read_text(encoding="utf-8"))]
    warc_dir = (data or shared_data()) / "warc"
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for name in sorted({label.warc for label in labels}):
        for row in scan_file(str(warc_dir / name), HeaderFilter()):
            rows[(name, row["record_offset"])] = row
    out = []
    for label in labels:
        row = rows[(label.warc, label.offset)]
        if row["url"] != label.url or row["reason"] is not None:
            raise ValueError(f"{label.warc}@{label.offset} is not the labelled page {label.url}")
        page = ne.Page.of(ne.decode_html(row["payload"], row["charset"]), row["url"])
        out.append((label, row, reference_body(page.doc, label.body_xpath)))
    return out


def evaluate(extractor: str, pages: list[tuple[Label, dict[str, Any], str]]) -> dict[str, Any]:
    """Mean scores of one extractor over the pages, with its mean seconds per page."""
    rules = ne.ContentRules(extractor=extractor, min_chars=0)
    scores, seconds = [], 0.0
    for label, row, reference in pages:
        started = time.perf_counter()
        result = ne.process_candidate(row, rules, NOW)
        seconds += time.perf_counter() - started
        scores.append(score(result, label, reference))
    return {
        "extractor": extractor,
        "pages": len(pages),
        **mean_scores(scores),
        "s_per_page": seconds / len(pages),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.extraction_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--extractors", default="hybrid,trafilatura,newsplease", help="comma-separated")
    args = p.parse_args(argv)
    pages = labelled_pages()
    results = []
    for extractor in args.extractors.split(","):
        evaluate(extractor, pages[:1])  # imports and first-call set-up, off the clock
        results.append(evaluate(extractor, pages))
    print(f"{'extractor':12s} {'pages':>5s} " + " ".join(f"{f:>11s}" for f in FIELDS) + f" {'s/page':>7s}")
    for r in results:
        print(
            f"{r['extractor']:12s} {r['pages']:5d} "
            + " ".join(f"{r[f]:11.3f}" for f in FIELDS)
            + f" {r['s_per_page']:7.3f}"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
