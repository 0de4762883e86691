"""ForecastQA end to end with the scripted backend: the fixture file imported, every item retrieved
with each of ForecastQA's retrievers (bm25_title, tfidf, dense) before its cutoff, and answered by
an oracle; a retriever the settings cannot run stops the run before any search."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pipelines.evaluate import run as evaluate
from pipelines.evaluate.context import RetrievalConfig
from pipelines.index import build as index
from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ship_script
from tests.fixtures.evaluate.data import write_articles
from udfs import storage

pytestmark = [pytest.mark.ray]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "evaluate" / "forecastqa_sample.json"
SAMPLE = json.loads(FIXTURE.read_text())
ANSWERS = {q["question"]: q["answer"] for kind in SAMPLE.values() for q in kind}
RETRIEVERS = ("bm25_title", "tfidf", "dense")


def day(month: int, d: int) -> dt.datetime:
    return dt.datetime(2019, month, d, 9, tzinfo=dt.UTC)


# every question has eligible articles sharing a rarer word with it (so TF-IDF scores them), and
# late articles that would answer it
ARTICLES = [
    ("port-traffic", day(1, 10), "Varna port traffic grows", "Cargo at the Varna river port grew last year."),
    (
        "budget-debate",
        day(2, 1),
        "Council debates harbour budget",
        "The council will vote on the budget in March.",
    ),
    ("ferry-plans", day(2, 20), "Ferry company plans", "The Varna ferry company studies a summer route."),
    ("second-port", day(3, 15), "Second port proposal", "A second river port for the city was proposed."),
    ("master-retires", day(4, 1), "Harbour master to retire", "The harbour master will retire this summer."),
    ("flood-warning", day(5, 20), "Flood warnings", "Flood warnings were issued along the river."),
    ("football", day(6, 1), "Football results", "The local team won again on Sunday."),
    ("exams", day(6, 10), "School year ends", "Pupils finished their exams."),
    ("concert", day(7, 1), "Concert in the park", "An open air concert drew large crowds."),
    ("hospital", day(9, 1), "New hospital wing", "The hospital opened a new wing for children."),
    ("port-closed", day(11, 20), "River port closed by a flood", "A flood closed the Varna river port."),
    (
        "master-named",
        day(12, 1),
        "Ana Petrova named harbour master",
        "Ana Petrova is the new harbour master.",
    ),
]


def oracle_choice(variables: dict) -> dict[str, float]:
    """0.9 on the fixture's answer (yes/no items have no choice list: Yes and No)."""
    answer = ANSWERS[variables["question"]]
    if not variables["choices"]:
        yes = answer.lower() == "yes"
        return {"Yes": 0.9 if yes else 0.1, "No": 0.1 if yes else 0.9}
    rest = 0.1 / (len(variables["choices"]) - 1)
    return {c["label"]: 0.9 if c["text"] == answer else rest for c in variables["choices"]}


def oracle_llm() -> LLMConfig:
    script = ship_script({"evaluate.forecast_choice": oracle_choice})
    return LLMConfig(backend="scripted", model="oracle", script=script, batch_size=16)


@pytest.fixture(scope="module")
def root(tmp_path_factory, ray_local) -> str:
    root = str(tmp_path_factory.mktemp("fqa") / "root")
    write_articles(root, ARTICLES)
    # dense is one of the retrievers the harness runs, tested for its cutoff, not its similarity
    index.run(index.Config(root=root, encoder="hashing-384", passage_words=()))
    return root


def test_each_forecastqa_retriever_runs_the_harness(root):
    outcome = evaluate.run(
        evaluate.Config(
            root=root,
            llm=oracle_llm(),
            forecastqa=(str(FIXTURE),),
            forecastqa_split="test",
            modes=("retrieval",),
            retrievers=RETRIEVERS,
        )
    )
    lists = {"yesno": "yesno_questions", "mc": "multichoice_questions"}
    cutoffs = {
        f"test-{kind}-{q['id']}": q["time_constraint"] for kind, key in lists.items() for q in SAMPLE[key]
    }
    assert {(r["item_id"], r["setting"]) for r in outcome.results} == {
        (i, f"retrieval-{r}.choice") for i in cutoffs for r in RETRIEVERS
    }
    for r in outcome.results:
        cutoff = dt.datetime.fromisoformat(cutoffs[r["item_id"]]).replace(tzinfo=dt.UTC)
        assert r["retrieved_ids"] and r["k"] == 10, (r["item_id"], r["setting"])
        assert all(d < cutoff for d in r["retrieved_dates"]), (r["item_id"], r["setting"])
        assert not {"port-closed", "master-named"} & set(r["retrieved_ids"])
    board = [r for r in outcome.reports["leaderboard"].to_pylist() if r["model"] == "oracle"]
    scored = {(r["task"], r["setting"]): r["accuracy"] for r in board if r["task"] in ("yesno", "mc")}
    assert scored == {(t, f"retrieval-{r}.choice"): 1.0 for t in ("yesno", "mc") for r in RETRIEVERS}


@pytest.mark.parametrize(
    ("retriever", "settings", "reason"),
    [
        ("tfidf", {"chunk_words": 100}, "tfidf_needs_whole_articles"),
        (
            "bm25_title",
            {"retrieval": {"forecastqa": RetrievalConfig(k=10, strict=True)}},
            "bm25_title_has_no_strict_form",
        ),
    ],
)
def test_a_retriever_the_settings_cannot_run_rejects_its_items_with_the_reason(
    root, retriever, settings, reason
):
    config = evaluate.Config(
        root=root,
        llm=oracle_llm(),
        forecastqa=(str(FIXTURE),),
        forecastqa_split="test",
        modes=("closed_book", "retrieval"),
        retrievers=(retriever,),
        **settings,
    )
    outcome = evaluate.run(config)
    assert outcome.results and {r["mode"] for r in outcome.results} == {"closed_book"}
    rejected = [
        r
        for r in storage.read_table(
            storage.join(root, "eval", "forecastqa", "oracle", "rejected")
        ).to_pylist()
        if r["setting"] == f"retrieval-{retriever}.choice"
    ]
    assert len(rejected) == outcome.items and {r["reason"] for r in rejected} == {reason}
