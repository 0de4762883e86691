"""jobs.ingest_wikipedia in Spark local mode on the real dumps, the written portal export and a
damaged export: pages, portal events, rejected rows, counts, schemas, reruns and S3."""

from __future__ import annotations

import bz2
import random
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from jobs import ingest_wikipedia
from tests.table_checks import read_conforming
from udfs import storage, wcep, wcep_html
from udfs.schemas import SOURCE_REJECT_REASONS, SOURCE_REJECTED, WCEP_EVENTS, WIKI_PAGES

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wcep"
PORTAL_DAYS = {
    date(2025, 9, 20): "template_2025_September_20.wikitext",
    date(2026, 6, 13): "sandwich_2026_June_13.wikitext",
    date(2026, 3, 28): "header_table_2026_March_28.wikitext",
}
TRUNCATED_PAGES = 120


def write_truncated_dump(path: Path) -> None:
    """A multi-block bz2 export cut at 60 %: the first blocks decode, the rest is gone."""
    rng = random.Random(7)
    pages = []
    for n in range(TRUNCATED_PAGES):
        words = " ".join(
            f"{rng.choice(['river', 'vote', 'storm', 'court', 'match'])}{rng.randint(0, 9999)}"
            for _ in range(300)
        )
        pages.append(
            f"<page><title>Synthetic page {n}</title><ns>0</ns><id>{800000 + n}</id><revision><id>{n + 1}</id>"
            f'<timestamp>2024-01-01T00:00:00Z</timestamp><text xml:space="preserve">{words}\n== Part ==\n{words}'
            "</text></revision></page>\n"
        )
    data = bz2.compress(("<mediawiki>\n" + "".join(pages) + "</mediawiki>\n").encode(), compresslevel=1)
    path.write_bytes(data[: int(len(data) * 0.6)])


@pytest.fixture(scope="module")
def wiki_run(spark, shared_data, tmp_path_factory):
    """One run over every dump; returns the root, the inputs and the two summaries."""
    tmp = tmp_path_factory.mktemp("wiki")
    write_truncated_dump(tmp / "truncated_dump.xml.bz2")
    inputs = [
        str(shared_data / "wikipedia" / "dbpedia_minidump_enwiki.xml.bz2"),
        str(shared_data / "wikipedia" / "enwiki-table-markup.xml.bz2"),
        str(FIXTURES / "portal_export.xml"),
        str(FIXTURES / "portal_export_damaged.xml"),
        str(tmp / "truncated_dump.xml.bz2"),
    ]
    root = str(tmp / "root")
    pages, days = ingest_wikipedia.run(ingest_wikipedia.Config(root=root, dumps=inputs), spark)
    return root, inputs, pages, days


def rows(spec, root: str) -> list[dict]:
    return spec.read(root).to_pylist()


def test_minidump_yields_its_27_pages_with_sections_categories_and_redirects(wiki_run):
    root = wiki_run[0]
    pages = {p["title"]: p for p in rows(WIKI_PAGES, root) if p["dump"] == "dbpedia_minidump_enwiki"}
    assert len(pages) == 27
    redirects = {t: p["redirect_target"] for t, p in pages.items() if p["is_redirect"]}
    assert redirects == {
        "`Abdu'l-Bahá": "ʻAbdu'l-Bahá",
        "The Amazing Spider-Man (2012 film)": "The Amazing Spider-Man (film)",
    }
    articles = [p for p in pages.values() if not p["is_redirect"] and p["ns"] == 0]
    assert len(articles) == 24
    assert all(p["sections"] for p in articles)
    assert sum(bool(p["categories"]) for p in articles) == 23  # the disambiguation page has none
    assert pages["Category:Pininfarina"]["ns"] == 14
    berlin = pages["Berlin"]
    assert berlin["page_id"] == 3354
    assert berlin["revision_time"] == datetime(2021, 12, 4, 20, 22, 12, tzinfo=UTC)
    assert "German state capitals" in berlin["categories"]
    assert {"level": 2, "title": "History", "text": ""} in berlin["sections"]
    words = len(berlin["lead"].split()) + sum(len(s["text"].split()) for s in berlin["sections"])
    assert berlin["n_words"] == words > 5000


def test_dump_without_siteinfo_parses(wiki_run):
    pages = [p for p in rows(WIKI_PAGES, wiki_run[0]) if p["dump"] == "enwiki-table-markup"]
    assert len(pages) == 5
    assert all(p["sections"] and p["n_words"] > 500 and p["ns"] == 0 for p in pages)


def test_portal_day_pages_become_the_events_of_their_layout(wiki_run, shared_data):
    events = [e for e in rows(WCEP_EVENTS, wiki_run[0]) if e["date"] in PORTAL_DAYS]
    assert {e["source_format"] for e in events} == {"wikitext"}
    html = shared_data / "wcep" / "wcep_portal_daily_html_2025-09_2026-08.jsonl.gz"
    rendered = {r["date"]: r["html"] for r in _jsonl(html) if date.fromisoformat(r["date"]) in PORTAL_DAYS}
    for day, fixture in PORTAL_DAYS.items():
        written = sorted((e for e in events if e["date"] == day), key=lambda e: e["position"])
        _, _, parsed = wcep.parse_wikitext_day(wcep.day_title(day), (FIXTURES / fixture).read_text())
        assert written == wcep.event_rows(day, parsed, "wikitext")
        _, from_html = wcep_html.parse_html_day(rendered[day.isoformat()], day, None)
        assert written == wcep.event_rows(day, from_html, "wikitext")


def _jsonl(path: Path):
    import gzip
    import json

    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_bad_pages_become_rejected_rows_and_later_pages_are_kept(wiki_run):
    root = wiki_run[0]
    rejected = {(r["source"], r["input"], r["item"], r["reason"]) for r in rows(SOURCE_REJECTED, root)}
    damaged = "portal_export_damaged"
    assert rejected == {
        ("wiki_pages", damaged, "Broken page", "malformed_xml"),
        ("wiki_pages", damaged, "Page without id", "missing_field"),
        ("wiki_pages", "truncated_dump", "truncated_dump.xml.bz2", "damaged_file"),
        ("wcep_wikitext", damaged, "Portal:Current events/2026 June 14", "unknown_layout"),
        ("wcep_wikitext", damaged, "Portal:Current events/2026 June 15", "no_events"),
        ("wcep_wikitext", damaged, "Portal:Current events/2026 February 30", "bad_date"),
        ("wcep_wikitext", damaged, "Portal:Current events/2026 June 16", "redirect"),
        ("wcep_wikitext", damaged, "Portal:Current events/2026 March 28", "duplicate_day"),
    }
    titles = {p["title"] for p in rows(WIKI_PAGES, root) if p["dump"] == damaged}
    # regression: Spark's default XML parser dropped every page after the malformed one
    assert "After the damage" in titles
    assert "Portal:Current events/2026 June 16" in titles  # a redirect is still a page
    assert "Broken page" not in titles and "Page without id" not in titles


def test_a_truncated_bz2_keeps_the_pages_before_the_damage(wiki_run):
    kept = [p for p in rows(WIKI_PAGES, wiki_run[0]) if p["dump"] == "truncated_dump"]
    assert 0 < len(kept) < TRUNCATED_PAGES
    assert all(p["title"].startswith("Synthetic page") and len(p["sections"]) == 1 for p in kept)


def test_summaries_reconcile_with_the_tables(wiki_run):
    root, inputs, pages, days = wiki_run
    assert pages.reconciles and days.reconciles
    page_rows = rows(WIKI_PAGES, root)
    rejected = rows(SOURCE_REJECTED, root)
    events = rows(WCEP_EVENTS, root)
    assert pages.rows_written == len(page_rows)
    assert pages.rejected == Counter(r["reason"] for r in rejected if r["source"] == "wiki_pages")
    assert days.rows_written == len({e["date"] for e in events}) == 3
    assert days.rejected == Counter(r["reason"] for r in rejected if r["source"] == "wcep_wikitext")
    assert days.metrics["events written"] == len(events) == 20
    assert {
        days.metrics[f"days in layout {layout}"] for layout in ("template", "sandwich", "header_table")
    } == {1}
    marker = storage.read_marker(WIKI_PAGES.uri(root))
    assert marker["rows_written"] == len(page_rows) and marker["reconciles"]
    assert len(marker["inputs"]) == len(inputs)
    assert storage.read_marker(WCEP_EVENTS.uri(root))["metrics"]["events written"] == 20


@pytest.mark.parametrize("spec", [WIKI_PAGES, WCEP_EVENTS, SOURCE_REJECTED], ids=lambda s: s.name)
def test_written_files_have_exactly_the_table_schema(wiki_run, spec):
    table = read_conforming(wiki_run[0], spec)
    assert table.num_rows > 0
    if spec is SOURCE_REJECTED:
        assert set(table.column("reason").to_pylist()) <= set(SOURCE_REJECT_REASONS)


def test_rerun_replaces_exactly_the_partitions_it_produces(wiki_run, spark):
    root = wiki_run[0]
    before = {
        spec.name: sorted(map(repr, rows(spec, root))) for spec in (WIKI_PAGES, WCEP_EVENTS, SOURCE_REJECTED)
    }
    files = set(storage.list_files(WIKI_PAGES.uri(root), ".parquet"))
    ingest_wikipedia.run(
        ingest_wikipedia.Config(root=root, dumps=[str(FIXTURES / "portal_export.xml")]), spark
    )
    after = {
        spec.name: sorted(map(repr, rows(spec, root))) for spec in (WIKI_PAGES, WCEP_EVENTS, SOURCE_REJECTED)
    }
    assert after == before
    files_after = set(storage.list_files(WIKI_PAGES.uri(root), ".parquet"))
    rewritten = {f for f in files ^ files_after}
    assert rewritten and all("/dump=portal_export/" in f for f in rewritten)


def test_a_page_the_parsers_fail_on_is_rejected_not_fatal(monkeypatch):
    def fail(*args):
        raise RecursionError("markup nested too deeply")

    monkeypatch.setattr(ingest_wikipedia, "parse_page", fail)
    monkeypatch.setattr(wcep, "parse_wikitext_day", fail)
    record = {
        "file": "file:/dumps/enwiki-x.xml.bz2",
        "title": "Portal:Current events/2026 June 13",
        "ns": 100,
        "id": 1,
        "redirect_title": None,
        "revision_id": 2,
        "revision_time": "2026-06-14T00:00:00Z",
        "text": "{{Current events|content=}}",
        "text_state": "ok",
        "malformed": None,
    }
    rejected = [row["reject"] for row in ingest_wikipedia.page_rows(record)]
    assert [(r["source"], r["input"], r["reason"]) for r in rejected] == [
        ("wiki_pages", "enwiki-x", "parse_error"),
        ("wcep_wikitext", "enwiki-x", "parse_error"),
    ]
    assert all(r["detail"] == "RecursionError: markup nested too deeply" for r in rejected)


@pytest.mark.s3
def test_s3_round_trip(spark, s3_root, wiki_run):
    dump = storage.join(s3_root, "inputs", "portal_export.xml")
    storage.write_bytes(dump, (FIXTURES / "portal_export.xml").read_bytes())
    ingest_wikipedia.run(ingest_wikipedia.Config(root=s3_root, dumps=[dump]), spark)
    pages = rows(WIKI_PAGES, s3_root)
    assert len(pages) == 6 and {p["dump"] for p in pages} == {"portal_export"}
    local = sorted(map(repr, (e for e in rows(WCEP_EVENTS, wiki_run[0]) if e["date"] in PORTAL_DAYS)))
    assert sorted(map(repr, rows(WCEP_EVENTS, s3_root))) == local
    assert storage.read_marker(WCEP_EVENTS.uri(s3_root))["rows_written"] == 3
