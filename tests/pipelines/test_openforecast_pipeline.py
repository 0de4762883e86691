"""The OpenForecast builder end to end on the real sample corpus.

Scripted backend: well-formed answers for every prompt, so every stage has non-empty output and
the structural checks run on real rows (MC options, cut times, splits, VQA, reconciliation,
round batching, merge fallback, permutation guard, leak filter, resumption). The embedded model:
``test_openforecast_local.py``.
"""

import datetime as dt
import json
import re
import shutil
from collections import Counter

import pytest

from pipelines.llm.config import LLMConfig
from pipelines.openforecast import Config, run
from udfs import storage
from udfs.cli import InputError
from udfs.openforecast.dates import period
from udfs.openforecast.questions import TASKS

pytestmark = [pytest.mark.ray, pytest.mark.spark]

STORIES = (
    "2025 Malagasy protests",  # train (test_start 2026-03-01: train ends 2025-12-31)
    "Syrian conflict|SDF–Syrian transitional government clashes",  # dev (2026-01-01 .. 2026-02-28)
    "Sudanese cholera epidemic",  # test (from 2026-03-01)
)
TEST_START = dt.date(2026, 3, 1)
WIKI_EVENTS = {"The Ren & Stimpy Show": "2025-11-20", 'Ren & Stimpy "Adult Party Cartoon"': "2026-02-10"}
DATED = re.compile(r"^(\d{4}-\d{2}-\d{2}):\s*")


# ----------------------------------------------------------------------------- the script
def _items(rendered: str) -> list[str]:
    return [re.sub(r"^\d+\.\s*", "", line).strip() for line in rendered.splitlines() if line.strip()]


def _answer(items: list[str]) -> str:
    """A numbered list as the model continues it after the prompt's "1." prefix."""
    return "\n".join(f"{i}. {e}" for i, e in enumerate(items, 1))[len("1.") :]


def _short(text: str, chars: int) -> str:
    """One line of at most ``chars`` characters (the declared answer forms bound every item)."""
    return " ".join(text.split())[:chars].rstrip()


def _news_items(v: dict) -> list[str]:
    """Three events per document: the dated report and two undated ones (cuts fall between them)."""
    topic = _short(v["title"], 50)
    return [
        f"{v['date']}: {_short(v['article'], 100)}",
        f"Officials respond to {topic}.",
        f"Observers follow {topic}.",
    ]


def complement(v: dict) -> str:
    if "cholera" in v["article"].lower() and v["date"] >= "2026-06-29":
        return _answer(_news_items(v))  # drops every known item: the merge fallback must fire
    return _answer(_items(v["timeline"]) + _news_items(v))


def adjust(v: dict) -> str:
    items = _items(v["timeline"])
    return _answer(items[:-1] + items[:1] if "Syrian" in v["title"] else items)  # Syrian: a repeat


def event_struct(v: dict) -> str:
    day = DATED.match(v["event"])
    words = DATED.sub("", v["event"]).rstrip(".").split()
    event = {
        "type": "statement",
        "trigger": re.sub(r"[^A-Za-z]", "", words[min(1, len(words) - 1)]) or "says",
        "time": day.group(1) if day else None,
        "location": _short(f"Region {words[-1]}", 60),
        "subject": _short(" ".join(words[:2]), 60),
        "object": _short(" ".join(words[-3:]), 60),
        "extra": {},
    }
    return " " + json.dumps([event])


def negatives(v: dict) -> str:
    true = v["true_event"]
    day = DATED.match(true)
    prefix, body = (f"{day.group(1)}: ", DATED.sub("", true)) if day else ("", true)
    later = [e for e in _items(v["future"]) if e != true]
    leak = int(v["sample_id"], 16) % 3 == 0 and later  # a real later event: the leak filter must drop it
    third = later[0] if leak else f"{prefix}Nothing follows after {body}"
    return f" {prefix}It is denied that {body}\nB: {prefix}Observers abroad claim that {body}\nC: {third}"


def mcac(v: dict) -> str:
    words = re.sub(r"[^\w ,.'-]", "", DATED.sub("", v["target_event"])).split()
    return (
        f" What is the {v['argument_name']} of this event: {' '.join(words[2:])}?\n"
        f"True answer: {' '.join(words[:2])}\nWrong answer A: Someone else\n"
        "Wrong answer B: Nobody at all\nWrong answer C: A third party"
    )


def extract_wiki(v: dict) -> str:
    end = dt.date.fromisoformat(WIKI_EVENTS[v["title"]])
    return _answer([f"{end - dt.timedelta(days=9 - i)}: {v['title']} milestone {i}." for i in range(7)])


SCRIPT = {
    "openforecast.page_category": lambda v: "Event" if v["title"] in WIKI_EVENTS else "Organization",
    "openforecast.page_date": lambda v: " " + WIKI_EVENTS[v["title"]],
    "openforecast.page_heading": lambda v: "Arts and culture",
    "openforecast.extract_wiki": extract_wiki,
    "openforecast.extract_news": lambda v: _answer(_news_items(v)),
    "openforecast.complement": complement,
    "openforecast.merge": lambda v: _answer(list(dict.fromkeys(_items(v["first"]) + _items(v["second"])))),
    "openforecast.adjust": adjust,
    "openforecast.event_time": lambda v: " " + (m.group(1) if (m := DATED.match(v["event"])) else "Unknown"),
    "openforecast.event_struct": event_struct,
    "openforecast.mcnc_negatives": negatives,
    "openforecast.mcac_question": mcac,
}


def _config(root: str) -> Config:
    return Config(
        root=root,
        llm=LLMConfig(backend="scripted", script=SCRIPT),
        wcep_stories=STORIES,
        max_docs=4,
        timeline_samples=1,
        test_start=TEST_START,
    )


@pytest.fixture(scope="module")
def scripted(ray_local, corpus_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("openforecast") / "root"
    shutil.copytree(corpus_root, root)
    config = _config(str(root))
    return config, run(config)


def _read(config: Config, name: str):
    return storage.read_table(storage.join(config.root, "benchmarks", "openforecast", name))


# ----------------------------------------------------------------------------- scripted checks
def test_every_task_and_split_is_non_empty(scripted):
    config, result = scripted
    counts = result.card["counts"]
    assert counts["complex_events"]["by_source"] == {"wikipedia": 2, "wcep": 3}
    assert all(n > 0 for n in counts["complex_events"]["by_split"].values())
    for task in TASKS:
        table = _read(config, task)
        assert table.num_rows == result.tables[task].num_rows > 0, task
        assert set(table.column("split").to_pylist()) <= {"train", "dev", "test"}
    assert set(result.tables["mcnc"].column("split").to_pylist()) == {"train", "dev", "test"}
    assert result.tables["aqa"].num_rows == result.tables["mcac"].num_rows
    assert result.tables["vqa"].num_rows == result.tables["mcnc"].num_rows
    items = _read(config, "eval_items")
    assert items.num_rows == sum(result.tables[t].num_rows for t in TASKS)
    assert None not in items.column("t_cut").to_pylist()
    titles = {r["ce_id"]: r["title"] for r in result.tables["ce"].to_pylist()}
    ce_of = {r["sample_id"]: r["ce_id"] for t in TASKS for r in result.tables[t].to_pylist()}
    for item in items.to_pylist():  # topical queries: the event's title, then the question's content
        assert item["query"].startswith(titles[ce_of[item["source_id"]]] + " "), item["item_id"]
    ltf = [i["query"] for i in items.to_pylist() if i["task"] == "ltf"]
    assert len(ltf) > 1 and len(set(ltf)) == len(ltf)
    assert storage.exists(storage.join(config.root, "benchmarks", "openforecast", "dataset_card.md"))
    assert result.card["prompt_versions"]["timeline_r00"] == "openforecast.extract_news@v2"
    llm_stages = [s for s in result.summaries if s.metrics.get("requests_total") is not None]
    assert llm_stages and all(s.rows_rejected == 0 for s in llm_stages)  # well-formed answers all parse


def test_mc_questions_have_four_distinct_options_and_exactly_one_gold(scripted):
    _, result = scripted
    events = {(r["ce_id"], r["idx"]): r["text"] for r in result.tables["atomic_event"].to_pylist()}
    for task in ("mcnc", "mcac"):
        rows = result.tables[task].to_pylist()
        assert rows
        for r in rows:
            assert len(r["choices"]) == 4 and len(set(r["choices"])) == 4
            assert r["gold_texts"] == [r["choices"][r["gold_index"]]]
            if task == "mcnc":
                truth = events[(r["ce_id"], r["target_idx"][0])]
                assert [c == truth for c in r["choices"]].count(True) == 1
    vqa = result.tables["vqa"].to_pylist()
    for r in vqa:
        assert r["choices"] == ["Yes", "No"] and r["gold_index"] in (0, 1)
    assert {r["gold_index"] for r in vqa} == {0, 1}  # both labels occur (balance: the unit tests)


def test_targets_at_or_after_the_cut_and_background_before_it(scripted):
    _, result = scripted
    events = {}
    for r in result.tables["atomic_event"].to_pylist():
        events.setdefault(r["ce_id"], []).append(r)
    checked = 0
    for task in TASKS:
        for s in result.tables[task].to_pylist():
            timeline = events[s["ce_id"]]
            assert s["background"] == [e["text"] for e in timeline[: s["cut_idx"]]]
            for e in timeline[: s["cut_idx"]]:
                assert e["ts"] is None or period(e["ts"]).end <= s["t_cut"], (task, e)
            for i in s["target_idx"]:
                ts = timeline[i]["ts"]
                assert i >= s["cut_idx"] and (ts is None or period(ts).end > s["t_cut"]), (task, ts)
                checked += ts is not None
            if task == "stf":
                assert s["t_cut"].isoformat() == s["target_day"]
                assert all(timeline[i]["ts"] == s["target_day"] for i in s["target_idx"])
    assert checked > 20


def test_splits_respect_their_windows(scripted):
    config, result = scripted
    cutoffs = config.cutoffs
    ces = {r["ce_id"]: r for r in result.tables["ce"].to_pylist()}
    for ce in ces.values():
        start = cutoffs.start(ce["split"])
        assert ce["ce_date"] <= cutoffs.end(ce["split"]) and (start is None or ce["ce_date"] >= start)
    for task in TASKS:
        for s in result.tables[task].to_pylist():
            assert s["split"] == ces[s["ce_id"]]["split"]
            if s["split"] != "train":
                assert s["t_cut"] >= cutoffs.start(s["split"])  # nothing in dev/test predates its split
    test_items = [s for t in TASKS for s in result.tables[t].to_pylist() if s["split"] == "test"]
    assert test_items and min(s["t_cut"] for s in test_items) >= TEST_START


def test_counts_reconcile_at_every_stage_and_rejections_are_rows(scripted):
    _, result = scripted
    assert all(s.reconciles for s in result.summaries)
    rejected = result.tables["rejected"].to_pylist()
    builder_steps = [s for s in result.summaries if s.metrics.get("requests_total") is None]
    by_stage = Counter(r["stage"] for r in rejected)
    for s in builder_steps:
        assert by_stage[s.name.split("/", 1)[1]] == s.rows_rejected, s.name
    reasons = {(r["stage"], r["reason"]) for r in rejected}
    assert ("adjust_guard", "not_a_permutation") in reasons
    assert ("mcnc_leak_filter", "negative_happened") in reasons
    assert ("wiki_events", "not_an_event") in reasons
    assert {r["detail"] for r in rejected if r["reason"] == "not_an_event"} == {"Organization"}
    assert ("wcep_documents", "beyond_max_docs") in reasons
    assert all(r["reason"] for r in rejected)


def test_complement_rounds_are_one_stage_each_with_provenance(scripted):
    _, result = scripted
    names = [s.name.split("/", 1)[1] for s in result.summaries]
    rounds = [s for s in result.summaries if re.fullmatch(r"openforecast/timeline_r\d\d", s.name)]
    wcep_ces = 3
    assert [s.name[-3:] for s in rounds] == ["r00", "r01", "r02", "r03"]  # R stage runs, not E×R
    assert all(s.rows_read == wcep_ces for s in rounds)
    assert names.count("adjust") == 1 and names.count("timestamps") == 1
    merges = [s for s in result.summaries if re.fullmatch(r"openforecast/merge_r\d\d", s.name)]
    assert merges and all(s.rows_read == 1 for s in merges)  # only the CE whose answer lost items
    provenance = result.tables["timeline_rounds"].to_pylist()
    per_ce = Counter(
        r["ce_id"] for r in provenance if r["round"] >= 0 and r["action"] != "complement_lost_items"
    )
    wcep_ids = {r["ce_id"] for r in result.tables["ce"].to_pylist() if r["source"] == "wcep"}
    assert all(per_ce[c] == 4 for c in wcep_ids)
    merged = [r for r in provenance if r["action"] == "merge"]
    assert merged and all(set(r["timeline_before"]) <= set(r["timeline_after"]) for r in merged)
    lost = [r for r in provenance if r["action"] == "complement_lost_items"]
    assert lost and all(r["retention"] < 0.8 for r in lost)


def test_rerun_is_served_from_the_stage_caches(scripted, monkeypatch):
    config, result = scripted
    import pipelines.llm.backends as backends

    monkeypatch.setattr(
        backends, "apply_backend", lambda *a, **k: pytest.fail("a finished build reran the engine")
    )
    again = run(config)
    assert again.tables["eval_items"].equals(result.tables["eval_items"])


def test_typos_and_missing_corpus_fail_before_any_model_call(corpus_root, tmp_path):
    with pytest.raises(ValueError, match="no story named"):
        run(Config(root=corpus_root, wcep_stories=("Syrian conflict|No such story",)))
    with pytest.raises(ValueError, match="no page named"):
        run(Config(root=corpus_root, wiki_titles=("Asda", "Nowhere page")))
    with pytest.raises(InputError, match="none of corpus/wiki_pages, corpus/wcep_events under"):
        run(Config(root=str(tmp_path)))


def test_plan_with_a_limit_runs_no_model_and_writes_nothing(ray_local, root_with_corpus, monkeypatch, capsys):
    import dataclasses

    import pipelines.llm.backends as backends

    monkeypatch.setattr(
        backends, "apply_backend", lambda *a, **k: pytest.fail("plan must not run the engine")
    )
    config = dataclasses.replace(_config(root_with_corpus), plan=True, limit=2)
    result = run(config)
    by_name = {s.name.split("/", 1)[1]: s for s in result.summaries}
    assert by_name["wcep_stories"].rows_written == 2 and by_name["wcep_stories"].rejected["over_limit"] == 1
    assert by_name["wiki_filter"].rows_written == 0 and by_name["wiki_filter"].rejected["over_limit"] > 0
    assert by_name["timeline_r00"].rejected == {"not_run": 2}
    assert "timeline_r00" in capsys.readouterr().out
    assert not storage.exists(storage.join(config.root, "benchmarks", "openforecast"))


def test_command_line_errors_are_one_line_before_any_work(tmp_path, capsys):
    from pipelines.openforecast.__main__ import parse_args
    from pipelines.options import main

    a_file = tmp_path / "a_file.txt"
    a_file.write_text("not a root")
    for root, message in (
        (tmp_path / "typo_dir", "does not exist"),
        (a_file, "is a file, not a directory"),
        (tmp_path, "none of corpus/wiki_pages, corpus/wcep_events under"),
    ):
        with pytest.raises(SystemExit) as exc:
            main("pipelines.openforecast", Config, run, None, ["--root", str(root)])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("python -m pipelines.openforecast: error: ") and message in err
    for argv in (["--limit", "-3"], ["--max-docs", "0"], ["--test-start", "2026-13-01"]):
        with pytest.raises(SystemExit):
            parse_args(["--root", str(tmp_path), *argv])
        assert "python -m pipelines.openforecast: error: argument" in capsys.readouterr().err
