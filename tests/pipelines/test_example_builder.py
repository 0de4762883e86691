"""The sixth builder of docs/writing_a_builder.md (``tests/example_builder``, shown file by file in
the doc): its package, its prompt and one registry line are all it takes. Registered, it runs
through the one driver, writes its tables, rejected rows, items and dataset card, and the audit
(its event key) and the evaluation (its retrieval settings) read it from the registry; no other
file of the kit names it. A run whose counts do not reconcile writes nothing."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

import udfs.prompts
from pipelines import builders
from pipelines.audit import run as audit_run
from pipelines.evaluate import run as evaluate
from pipelines.evaluate.context import RetrievalConfig
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import read_rejected
from pipelines.llm.scripted import ship_script
from udfs import storage
from udfs.layout import Layout
from udfs.quality import question_problems

pytestmark = [pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tests" / "example_builder"
DOC = REPO / "docs" / "writing_a_builder.md"
REGISTRY_LINE = "tests.example_builder"  # what the doc adds to pipelines.builders.MODULES
_FILE_BLOCK = re.compile(r"```\w*\n# (tests/example_builder/\S+)\n(.*?)```", re.S)


def ask(variables: dict) -> str:
    """The scripted model: a question from each headline, except one answer that is none."""
    if "Ferry" in variables["title"]:
        return " Ferries, probably."
    return f" Will the news '{variables['title'].lower()}' hold by the end of {variables['month_year']}?"


def forecaster(variables: dict) -> dict[str, float]:
    return {"Yes": 0.7, "No": 0.3}


@pytest.fixture
def root(toy_index, tmp_path) -> str:
    """A copy of the toy articles and their index (``toy_index``), for the example to build on."""
    return str(shutil.copytree(toy_index, tmp_path / "root"))


@pytest.fixture
def register(monkeypatch, tmp_path):
    """The example's one registry line, and its prompt where prompts live (``prompts/<group>/``:
    a prompts directory of the kit's groups and the example's)."""

    def apply() -> builders.Builder:
        monkeypatch.setattr(builders, "MODULES", (*builders.MODULES, REGISTRY_LINE))
        prompts = tmp_path / "prompts"
        prompts.mkdir()
        for group in udfs.prompts.PROMPTS_DIR.iterdir():
            (prompts / group.name).symlink_to(group)
        (prompts / "example").symlink_to(PACKAGE / "prompts" / "example")
        monkeypatch.setattr(udfs.prompts, "PROMPTS_DIR", prompts)
        builder = builders.get("example")
        assert builder is not None
        return builder

    return apply


def test_the_doc_shows_the_example_builder_file_by_file():
    blocks = {path: text for path, text in _FILE_BLOCK.findall(DOC.read_text())}
    files = {
        p.relative_to(REPO).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert set(blocks) == files
    for path, text in blocks.items():
        assert text == (REPO / path).read_text(), path
    assert f'"{REGISTRY_LINE}",' in DOC.read_text()  # the registry line the doc adds


def test_one_registry_line_puts_the_example_in_the_driver_the_audit_the_evaluation_and_its_card(
    root, register
):
    assert builders.get("example") is None  # not registered: unknown to the kit
    builder = register()
    config = builder.config(
        root=root,
        llm=LLMConfig(backend="scripted", script=ship_script({"example.question": ask})),
        min_title_words=4,
    )
    result = builder.run(config)

    # the driver: tables, rejected rows, items and the card, counts reconciled
    questions = result.tables["questions"].to_pylist()
    assert len(questions) >= 5 and all(q["question"].startswith("Will ") for q in questions)
    assert {q["split"] for q in questions} == {"train", "test"}
    assert all(s.reconciles for s in result.summaries)
    rejected = read_rejected(root, "example").to_pylist()
    reasons = {(r["stage"], r["reason"]) for r in rejected}
    assert reasons == {("headlines", "short_title"), ("question", "parse_error")}
    items = storage.read_table(Layout(root).benchmark("example", "eval_items")).to_pylist()
    assert len(items) == len(questions) == result.card["counts"]["questions"]
    card = storage.read_json(Layout(root).benchmark("example", "dataset_card.json"))
    assert card["benchmark"] == "example" and card["prompt_versions"] == {"question": "example.question@v1"}
    assert card["counts"]["rejected"] == len(rejected) == 2
    assert card["llm_cost"]["stages"]["example/question"]["rows"] == len(questions) + 1
    assert storage.exists(Layout(root).benchmark("example", "dataset_card.md"))

    # the audit: its split check goes through the event key the example declares
    report = audit_run.run(audit_run.Config(root=root))
    (example,) = [a for a in report.benchmarks if a.name == "example"]
    assert "split_overlap" not in example.skipped and example.tallies["split_overlap"].checked == len(items)
    assert "event = source article (article_id of questions)" in example.notes
    assert report.violations == 0

    # the evaluation: its items are retrieved with the settings the example declares (k = 2)
    assert evaluate.Config(root=root).retrieval["example"] == RetrievalConfig(k=2, doc_words=50)
    outcome = evaluate.run(
        evaluate.Config(
            root=root,
            llm=LLMConfig(backend="scripted", script=ship_script({"evaluate.forecast_choice": forecaster})),
            benchmarks=("example",),
            modes=("retrieval",),
        )
    )
    retrieved = [r for r in outcome.results if r["benchmark"] == "example" and r["mode"] == "retrieval"]
    assert len(retrieved) == len(items)
    assert all(len(r["retrieved_ids"]) <= 2 for r in retrieved)
    assert any(
        r["n_eligible"] > 2 and len(r["retrieved_ids"]) == 2 for r in retrieved
    )  # k = 5 would show more


def test_a_run_whose_counts_do_not_reconcile_writes_nothing(root, register):
    builder = register()

    def miscount(b: builders.Build, s) -> None:
        step = b.ledger.step("miscount")
        step.rows_read += len(s.questions)  # read, never kept nor dropped

    broken = dataclasses.replace(builder, steps=(*builder.steps, miscount))
    config = builder.config(
        root=root, llm=LLMConfig(backend="scripted", script=ship_script({"example.question": ask}))
    )
    with pytest.raises(AssertionError, match=r"counts do not reconcile in .*example/miscount"):
        builders.build(broken, config)
    assert not storage.exists(Layout(root).benchmark("example"))  # no table, rejected row, item or card

    result = builders.build(builder, config)  # the same run without the miscount writes them all
    assert result.tables["questions"].num_rows > 0 and storage.exists(
        Layout(root).benchmark("example", "eval_items")
    )


def degenerate(variables: dict) -> str:
    """A model that loops on one headline and writes the same question for every headline with
    "port" in it: the quality gate's cases."""
    title = variables["title"]
    if "Ferry" in title:
        return " Ferries, probably."
    if "quay" in title:
        return " Will be. Answer 1 will be. Answer 1 will be. Answer 1 will be?"
    if "port" in title.lower():
        return " Will the river port reopen to cargo ships before the end of the month?"
    return ask(variables)


def test_the_quality_gate_keeps_degenerate_and_repeated_questions_out_of_the_benchmark(root, register):
    """Every item passes the gate before it is written: a looping question and the later copies
    of a repeated one become ``quality_*`` rejected rows and leave the items and the builder's
    question table; the card has its quality section."""
    builder = register()
    llm = LLMConfig(backend="scripted", script=ship_script({"example.question": degenerate}))
    result = builder.run(builder.config(root=root, llm=llm, min_title_words=4))

    rejected = [r for r in read_rejected(root, "example").to_pylist() if r["stage"] == "quality"]
    reasons = {r["reason"] for r in rejected}
    assert {"quality_repeated_ngram", "quality_near_duplicate"} <= reasons, reasons
    items = storage.read_table(Layout(root).benchmark("example", "eval_items")).to_pylist()
    gone = {r["item_id"] for r in rejected}
    assert items and not gone & {i["item_id"] for i in items}
    assert not gone & set(result.tables["questions"].column("question_id").to_pylist())
    assert [i["question"] for i in items if question_problems(i["question"], i["choices"])] == []
    repeated = [i for i in items if i["question"].startswith("Will the river port reopen")]
    assert len(repeated) == 1  # the earliest copy is kept
    dups = [r for r in rejected if r["reason"] == "quality_near_duplicate"]
    assert all(r["detail"].endswith(repeated[0]["item_id"]) for r in dups)
    summary = next(s for s in result.summaries if s.name == "example/quality")
    assert summary.reconciles and summary.rows_read == len(items) + len(rejected)

    card = storage.read_json(Layout(root).benchmark("example", "dataset_card.json"))
    quality = card["quality"]
    assert quality["items"] == len(items)
    assert quality["rejected_by_quality_check"] == dict(Counter(r["reason"] for r in rejected))
    assert quality["near_duplicate_rate"] > 0 and quality["yes_no_balance"]["Yes"]["n"] == len(items)
    md = storage.read_bytes(Layout(root).benchmark("example", "dataset_card.md")).decode()
    assert "## Quality" in md and "## Steps" in md and "quality_near_duplicate" in md
    # every step of the run in order, as the report's funnel shows it
    assert [s["step"] for s in card["steps"]] == [s.name.split("/", 1)[-1] for s in result.summaries]
    assert card["steps"][-1] == {
        "step": "quality",
        "unit": "rows",
        "read": summary.rows_read,
        "kept": len(items),
        "rejected": dict(sorted(quality["rejected_by_quality_check"].items())),
    }
