"""The HTML report on a demo-sized root: what each page shows is what the root holds (item counts,
sampled items with their articles, the funnel's rejected counts, timelines and outlines,
leaderboard rows, the audit), the sample is seeded and bounded, a card's quality section shows
when present, and an s3:// root gives the same pages."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipelines.report import read
from pipelines.report.__main__ import main
from pipelines.report.run import Config, run
from udfs import storage
from udfs.layout import Layout

pytestmark = [pytest.mark.ray, pytest.mark.spark]


class Text(HTMLParser):
    """The visible text of a page, its elements' ids and its table rows (cell texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.ids: set[str] = set()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join(" ".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        self.parts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def page(path: Path) -> Text:
    parsed = Text()
    parsed.feed(path.read_text())
    return parsed


@pytest.fixture(scope="module")
def report(demo_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    run(Config(root=demo_root, out=str(out), sample=6, events=2))
    return out


def test_index_lists_every_benchmark_with_its_item_count(demo_root, report):
    names = read.discover_benchmarks(demo_root)
    assert {"daily_oracle", "openforecast", "tcelongbench"} <= set(names)
    index = page(report / "index.html")
    header = index.rows[0]
    rows = {r[0]: dict(zip(header, r, strict=True)) for r in index.rows[1:]}
    assert sorted(rows) == names
    for name in names:
        items = storage.read_table(Layout(demo_root).benchmark(name, "eval_items"), columns=["split"])
        assert items.num_rows > 0, name  # every scripted builder wrote items
        row = rows[name]
        assert row["items"] == f"{items.num_rows:,}"
        splits = Counter(items["split"].to_pylist())
        assert row["by split"] == ", ".join(f"{s} {n:,}" for s, n in sorted(splits.items()))
        assert (
            row["rejected rows"] == f"{storage.count_rows(Layout(demo_root).benchmark(name, 'rejected')):,}"
        )
        card = read.read_card(demo_root, name)
        assert row["LLM requests"] == f"{card['llm_cost']['total']['requests_total']:,}"
        assert (report / f"{name}.html").is_file()


def test_benchmark_page_shows_a_bounded_sample_with_articles(demo_root, report):
    name = "daily_oracle"
    html = (report / f"{name}.html").read_text()
    parsed = page(report / f"{name}.html")
    total = storage.count_rows(Layout(demo_root).benchmark(name, "eval_items"))
    shown = re.findall(r'<article class="item" id="item-\d+">', html)
    assert len(shown) == min(6, total)
    items = storage.read_table(Layout(demo_root).benchmark(name, "eval_items")).to_pylist()
    sampled = [i for i in items if i["item_id"] in html]
    assert len(sampled) == len(shown)
    for item in sampled:
        assert " ".join(item["question"].split()) in parsed.text
        gold = read.articles(demo_root, item["gold_article_ids"])
        assert gold, item["item_id"]  # Daily Oracle's gold article is a corpus article
        for article in gold.values():
            assert f'href="{article["url"]}"' in html.replace("&amp;", "&")
            assert " ".join(article["title"].split()) in parsed.text


def test_sample_is_seeded(demo_root, report, tmp_path):
    run(Config(root=demo_root, out=str(tmp_path), sample=6, events=2))
    ids = re.compile(r"<code>([0-9a-f]{32})</code></span></header>")
    first = ids.findall((report / "daily_oracle.html").read_text())
    assert first and first == ids.findall((tmp_path / "daily_oracle.html").read_text())


def test_funnel_counts_every_rejected_reason(demo_root, report):
    for name in read.discover_benchmarks(demo_root):
        table = storage.read_table(Layout(demo_root).benchmark(name, "rejected"), columns=["stage", "reason"])
        by_stage: dict[str, Counter] = {}
        for stage, reason in zip(table["stage"].to_pylist(), table["reason"].to_pylist(), strict=True):
            by_stage.setdefault(stage, Counter())[reason] += 1
        text = page(report / f"{name}.html").text
        funnel = text[text.index("Funnel of the build") : text.index("Quality")]
        for stage, reasons in by_stage.items():
            row = ", ".join(f"{r} {n:,}" for r, n in sorted(reasons.items()))
            assert f"{stage} " in funnel and row in funnel, (name, stage, row)
        card = read.read_card(demo_root, name)
        for stage, cost in card["llm_cost"]["stages"].items():
            short = stage.split("/", 1)[-1]
            assert f"{short} LLM request {cost['rows']:,} {cost['rows'] - cost['failed']:,}" in funnel


def test_timelines_and_outlines_come_from_the_native_tables(demo_root, report):
    text = page(report / "openforecast.html").text
    text = text[text.index("Complex events and their timelines") : text.rindex("Evaluation")]
    kept = [
        r
        for r in storage.read_table(Layout(demo_root).benchmark("openforecast", "ce")).to_pylist()
        if r["kept"]
    ]
    assert kept
    events = storage.read_table(Layout(demo_root).benchmark("openforecast", "atomic_event")).to_pylist()
    shown = [ce for ce in kept if ce["title"] in text]
    assert len(shown) == min(2, len(kept))
    for ce in shown:
        for e in (e for e in events if e["ce_id"] == ce["ce_id"]):
            assert " ".join(e["text"].split()) in text
    text = page(report / "tcelongbench.html").text
    text = text[text.index("Temporal complex events and their outlines") : text.rindex("Evaluation")]
    tces = [
        r["tce_id"]
        for r in storage.read_table(Layout(demo_root).benchmark("tcelongbench", "tce")).to_pylist()
    ]
    shown = [t for t in tces if f"id {t}" in text]
    assert len(shown) == min(2, len(tces))
    points = storage.read_table(Layout(demo_root).benchmark("tcelongbench", "key_point")).to_pylist()
    kept_points = [p for p in points if p["status"] == "kept" and p["tce_id"] in shown]
    assert kept_points and all(" ".join(p["text"].split()) in text for p in kept_points)
    links = [
        r
        for r in storage.read_table(Layout(demo_root).benchmark("tcelongbench", "tce_article")).to_pylist()
        if r["tce_id"] in shown
    ]
    titles = read.articles(demo_root, [r["article_id"] for r in links])
    assert titles and all(" ".join(a["title"].split()) in text for a in titles.values())


def test_leaderboard_and_audit_are_shown(demo_root, report):
    board = read.leaderboard(demo_root)
    audit = read.audit(demo_root)
    assert board and audit
    evaluation = page(report / "evaluation.html")
    for name in {r["benchmark"] for r in board}:
        assert f"eval-{name}" in evaluation.ids
        rows = [r for r in board if r["benchmark"] == name and r["model"] == "leans-first"]
        assert rows and f"leans-first {rows[0]['setting']}" in page(report / f"{name}.html").text
    for name, entry in audit["benchmarks"].items():
        assert f"audit-{name}" in evaluation.ids
        assert f"violations {entry['violations']}" in evaluation.text
    assert (report / "evaluation.html").read_text().count("<svg") >= len({r["benchmark"] for r in board})


def test_quality_section_when_present_and_not_recorded_when_absent(demo_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(Path(demo_root) / "benchmarks" / "daily_oracle", root / "benchmarks" / "daily_oracle")
    card_uri = Layout(str(root)).benchmark("daily_oracle", "dataset_card.json")
    card = storage.read_json(card_uri)
    assert card["quality"]["items"] >= 0  # the builder driver writes it into every card
    storage.write_json(card_uri, {k: v for k, v in card.items() if k != "quality"})  # an older card
    run(Config(root=str(root)))
    assert (
        "Not recorded: this card has no quality section." in page(root / "report" / "daily_oracle.html").text
    )
    card["quality"] = {
        "items": 12,
        "tasks": {"mc": 8, "tf": 4},
        "rejected_by_quality_check": {"quality_near_duplicate": 3},
        "near_duplicate_rate": 0.2,
        "yes_no_balance": {"No": {"n": 3, "share": 0.75}, "Yes": {"n": 1, "share": 0.25}},
        "question_words": {"min": 4.0, "median": 9.0, "mean": 9.5, "p90": 14.0, "max": 15.0},
        "horizon_days": None,
        "paper": {"items": "16,783"},
    }
    storage.write_json(card_uri, card)
    run(Config(root=str(root)))
    text = page(root / "report" / "daily_oracle.html").text
    assert "near-duplicate rate 20.0%" in text
    assert "yes/no answers No 3 (75%), Yes 1 (25%)" in text
    assert "question length (words) min 4.00 · median 9.00" in text
    assert "the paper's own figures items 16,783" in text
    assert "(not in corpus/articles)" in text  # no corpus under this root: articles shown by id


def test_report_from_an_s3_root_matches_the_local_one(demo_root, report, s3_root):
    for part in ("benchmarks", "eval", "corpus/articles"):
        storage.upload_tree(str(Path(demo_root) / part), storage.join(s3_root, part))
    index = run(Config(root=s3_root, sample=6, events=2))
    assert index == storage.join(s3_root, "report", "index.html")
    for name in [*read.discover_benchmarks(demo_root), "index", "evaluation"]:
        remote = storage.read_bytes(storage.join(s3_root, "report", f"{name}.html")).decode()
        local = (report / f"{name}.html").read_text()
        remote = remote.replace(storage.normalize_uri(s3_root), "ROOT")
        local = local.replace(storage.normalize_uri(demo_root), "ROOT")
        strip = re.compile(r"<footer>.*</footer>", re.S)  # generation time
        assert strip.sub("", remote) == strip.sub("", local), name


def test_command_line_refuses_a_root_with_nothing_to_report(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_:
        main(["--root", str(tmp_path / "empty")])
    assert exit_.value.code == 2
    assert "nothing to report" in capsys.readouterr().err
