"""The PROPHET scripted tests' world: a small synthetic corpus whose dates exercise every rule, its
questions, a deterministic stand-in model for every prompt (and a flaky one that fails on
purpose), the direct CIL evaluation the build must equal, and the checks of a build's outputs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import itertools
import json
import math
import re
import tempfile
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import pipelines.llm.stage as stage_module
from pipelines.index import build as index_build
from pipelines.index.config import Config as IndexConfig
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import REJECTED_SCHEMA, read_rejected
from pipelines.llm.render import RequestRenderer
from pipelines.prophet.config import Config
from udfs import storage
from udfs.eval_items import EVAL_ITEM_SCHEMA
from udfs.ids import stable_id
from udfs.layout import Layout
from udfs.schemas import ARTICLES

UTC = dt.UTC
D1, D2 = dt.date(2024, 7, 28), dt.date(2024, 7, 10)
MIDNIGHT = dt.time(0, tzinfo=UTC)
TOPIC = "Harbor workers at the port of Port Elm went on strike over wages; shipping was delayed."


def at(day: dt.date, days_before: float) -> dt.datetime:
    return dt.datetime.combine(day, MIDNIGHT) - dt.timedelta(days=days_before)


ARTICLE_DATES = {  # relative to D1 = 2024-07-28
    "A1": at(D1, 2),
    "A2": at(D1, 5),
    "A3": at(D1, 12),
    "A4": at(D1, 25),
    "A5": at(D1, 27),
    "A6": at(D1, 33),
    "A7": at(D1, 36),
    "A8": at(D1, 55),
    "LATE0": at(D1, 0),  # exactly D1: never eligible for the D1 question
    "LATE1": at(D1, -3),
    "UNDATED": None,
    "DUP": at(D1, 2),
}


def write_corpus(root: str) -> None:
    """The synthetic articles under ``root`` and their article index (needs ``ray_local``)."""
    rows = []
    for name, published in ARTICLE_DATES.items():
        text = f"{TOPIC} Dockers and union leaders met officials. Item {name.lower()} of the strike coverage."
        rows.append(
            {
                "article_id": f"id-{name}",
                "url": f"https://news.example/{name}",
                "canonical_url": f"https://news.example/{name}",
                "host": "news.example",
                "title": f"Report {name}",
                "text": text,
                "published_at": published,
                "date_source": "meta" if published else None,
                "crawled_at": dt.datetime(2024, 8, 5, tzinfo=UTC),
                "language": "en",
                "n_chars": len(text),
                "text_hash": stable_id(text),
                "near_duplicate_of": "id-A1" if name == "DUP" else None,
                "warc_file": None,
                "warc_record_id": None,
                "extractor": "synthetic",
                "published_date": published.date() if published else None,
            }
        )
    table = pa.Table.from_pylist(rows, schema=ARTICLES.schema)
    storage.write_dataset(table, ARTICLES.uri(root), ARTICLES.partition_cols, replace="all")
    # PROPHET searches whole articles only, by BM25: the vectors need no model
    index_build.run(IndexConfig(root=root, encoder="hashing-384", passage_words=()))


def write_questions(path: Path) -> str:
    questions = [
        {
            "id": "strike-ends",
            "question": "Will the Port Elm harbor strike end before 2024-07-28?",
            "background": "Harbor workers at Port Elm have been on strike over wages.",
            "resolution_criteria": "Resolves Yes if the union announces the end of the strike.",
            "resolution_date": D1.isoformat(),
            "answer": 1,
        },
        {
            "id": "strike-spreads",
            "question": "Will the Port Elm strike spread to other ports before 2024-07-10?",
            "background": None,
            "resolution_date": D2.isoformat(),
            "answer": 0,
        },
    ]
    path.write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------ the stand-in
def unit(*parts: object) -> float:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:13], 16) / 16**13


def prob(*parts: object) -> float:
    """A stand-in probability in the paper's ``*0.xx*`` form: two decimals in [0.01, 0.99]."""
    return round(0.01 + 0.98 * unit(*parts), 2)


def ident(text: str) -> str:
    return re.search(r"Report (\w+)", text).group(1)


def statuses(v: dict) -> dict[str, int]:
    if "scenario" in v:
        return {ident(a["text"]): int(s["happened"]) for a, s in zip(v["window"], v["scenario"], strict=True)}
    return {ident(a["text"]): 1 for a in v["happened"]} | {ident(a["text"]): 0 for a in v["not_happened"]}


def joint_p(v: dict) -> float:
    return prob("joint", sorted(statuses(v).items()))


def conditional_p(v: dict) -> float:
    return prob("cond", ident(v["focal"]["text"]), bool(v["focal_happened"]), sorted(statuses(v).items()))


def rating_of(v: dict) -> int:
    name = ident(v["article"])
    return 1 if name == "A8" else 2 + int(unit("rating", name) * 5)


QUERIES = 'Port Elm strike", "harbor workers wages"]'


def scripted(failures_dir: Path | None = None) -> LLMConfig:
    """Well-formed answers for every prompt; with ``failures_dir``, each distinct verbalized
    conditional prompt is malformed the first time it is seen (a marker file remembers it)."""

    def once_malformed(v: dict) -> str:
        good = f"Weighing the reasons. *{conditional_p(v):.2f}*"
        if failures_dir is None:
            return good
        marker = failures_dir / hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest()
        if marker.exists():
            return good
        marker.write_text("seen")
        return "I cannot give a number."

    return LLMConfig(
        backend="scripted",
        script={
            "prophet.query_entities": lambda v: QUERIES,
            "prophet.query_steps": lambda v: "entity 1",  # a copied placeholder: rejected, then retried
            "prophet.query_similar": lambda v: 'dock strike", "port shutdown"]',
            "prophet.relevance": lambda v: f"Thoughts: about the strike.\nRating: {rating_of(v)}",
            "prophet.relevance_score": lambda v: {str(rating_of(v)): 1.0},
            "prophet.joint_yesno": lambda v: {"Yes": joint_p(v), "No": 1 - joint_p(v)},
            "prophet.conditional_yesno": lambda v: {"Yes": conditional_p(v), "No": 1 - conditional_p(v)},
            "prophet.joint_grouped": lambda v: f"Plausible. *{joint_p(v):.2f}*",
            "prophet.conditional_grouped": once_malformed,
        },
    )


class RecordingRenderer(RequestRenderer):
    """The stage runner's renderer, which also writes the prompt of every request it renders (a
    file per batch into ``directory``: it runs in Ray workers) and tells the script which stage
    and sample slot a request is for (``_stage``, ``_slot``, in the request's variables)."""

    def __init__(self, *args: Any, directory: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.directory = directory  # an instance field: it travels with the renderer to workers

    def units(self, out, i, record):
        before = len(out.take)
        super().units(out, i, record)
        slot = record.get("slot")
        for unit in range(before, len(out.take)):
            extra = {
                "_stage": self.stage.name,
                "_slot": out.columns["__sample"][unit] if slot is None else slot,
            }
            for n in range(out.offsets[unit], out.offsets[unit + 1]):
                out.requests["variables_json"][n] = json.dumps(
                    json.loads(out.requests["variables_json"][n]) | extra
                )

    def __call__(self, batch):
        units = super().__call__(batch)
        texts = [r["prompt_text"] for requests in units.column("__requests").to_pylist() for r in requests]
        Path(self.directory, f"{self.stage.name}-{uuid.uuid4().hex}.json").write_text(json.dumps(texts))
        return units


class Recorded(Mapping):
    """The prompts ``RecordingRenderer`` wrote, by stage name."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def _read(self) -> dict[str, list[str]]:
        seen: dict[str, list[str]] = {}
        for file in sorted(self.directory.glob("*.json")):
            seen.setdefault(file.name.rsplit("-", 1)[0], []).extend(json.loads(file.read_text()))
        return seen

    def __getitem__(self, stage: str) -> list[str]:
        return self._read()[stage]

    def __iter__(self):
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def record_requests(mp: pytest.MonkeyPatch) -> Recorded:
    """Render every stage with ``RecordingRenderer``; returns the prompts it recorded."""
    directory = tempfile.mkdtemp(prefix="prompts-")
    mp.setattr(stage_module, "RequestRenderer", functools.partial(RecordingRenderer, directory=directory))
    return Recorded(directory)


def flaky() -> LLMConfig:
    """The script of ``scripted()`` where (b) fails on its first attempt and succeeds on the retry,
    and every verbalized conditional of sample slot 1 fails on its first attempt and on retry 1
    and succeeds on retry 2. Slots 0 and 1 answer c − d and c + d, so their mean is the stand-in's
    c (needs ``record_requests``)."""

    def steps(v: dict) -> str:
        return "entity 1" if v["_stage"] == "query_steps" else 'dock strike wages", "union talks"]'

    def conditional(v: dict) -> str:
        if v["_slot"] == 1 and v["_stage"] in ("conditional", "conditional_retry1"):
            return "I cannot give a number."
        c = conditional_p(v)
        d = round(min(c, 1 - c) / 2, 2)
        return f"Weighing the reasons. *{c + d if v['_slot'] == 1 else c - d:.2f}*"

    base = scripted()
    return dataclasses.replace(
        base,
        script={**base.script, "prophet.query_steps": steps, "prophet.conditional_grouped": conditional},
    )


def direct_cil(evidence: list[dict], answer: int, d: dt.date, w: int, k_max: int) -> dict[str, float]:
    """CIL from the definitions over a question's evidence rows (ids as the stand-in sees them)."""
    limit = dt.datetime.combine(d, MIDNIGHT)
    g = {e["article_id"]: (limit - e["published_at"]) // dt.timedelta(days=10) for e in evidence}
    name = {e["article_id"]: e["article_id"].removeprefix("id-") for e in evidence}
    out = {}
    for i in evidence:
        window = [j for j in evidence if 1 <= g[j["article_id"]] - g[i["article_id"]] <= w]
        window = sorted(window, key=lambda j: (-j["rating"], -j["published_at"].timestamp(), j["article_id"]))
        window = window[:k_max]
        values = list(itertools.product((0, 1), repeat=len(window)))
        assign = [{name[j["article_id"]]: v for j, v in zip(window, a, strict=True)} for a in values]
        q = [prob("joint", sorted(s.items())) for s in assign]
        pi = [x / sum(q) for x in q]
        do = {}
        for x in (True, False):
            c = [prob("cond", name[i["article_id"]], x, sorted(s.items())) for s in assign]
            do[x] = sum(p * (cc if answer == 1 else 1 - cc) for p, cc in zip(pi, c, strict=True))
        out[i["article_id"]] = do[True] - do[False]
    return out


def config(root: str, questions: str, llm: LLMConfig, **changes) -> Config:
    base = {
        "root": root,
        "questions": questions,
        "llm": llm,
        "top_n": 5,
        "k_max": 2,
        "k": 2,
        "search_depth": 20,
    }
    return Config(**(base | changes))


def check_outputs(result, root: str, answers: dict[str, int], dates: dict[str, dt.date]) -> None:
    t = result.tables
    evidence = t["evidence"].to_pylist()
    assert evidence, "no evidence: the structural checks below would be vacuous"
    for e in evidence:
        assert e["published_at"] < dt.datetime.combine(dates[e["question_id"]], MIDNIGHT)
    assert "id-LATE0" not in {e["article_id"] for e in evidence}
    assert "rejected" not in t  # streamed to disk, never returned whole
    written = read_rejected(root, "prophet")
    assert written.schema == REJECTED_SCHEMA
    rejected = written.to_pylist()
    assert result.card["counts"]["rejected_by_stage_and_reason"] == dict(
        Counter(f"{d['stage']}: {d['reason']}" for d in rejected)
    )
    reasons = {(d["stage"], d["reason"]) for d in rejected}
    assert ("selection", "rating_1") in reasons
    # the articles no search can return are counted by the corpus step, not listed one row each
    corpus = next(s for s in result.summaries if s.name == "prophet/corpus")
    assert (corpus.rows_read, corpus.rows_written) == (len(ARTICLE_DATES), len(ARTICLE_DATES) - 2)
    assert corpus.rejected == {"no_usable_date": 1, "near_duplicate": 1}
    assert not any(d["stage"] == "corpus" for d in rejected)
    assert ("selection", "below_top_n") in reasons
    assert all(s.reconciles for s in result.summaries)
    cil = t["cil"].to_pylist()
    assert len(cil) == len(evidence) and all(r["status"] == "ok" for r in cil)
    assert any(r["truncated"] for r in cil) and any(r["k"] == 2 for r in cil)
    by_question = {}
    for e in evidence:
        by_question.setdefault(e["question_id"], []).append(e)
    questions = {q["question_id"]: q for q in t["questions"].to_pylist()}
    for qid, rows in by_question.items():
        expected = direct_cil(rows, answers[qid], dates[qid], 3, 2)
        got = {r["article_id"]: r["cil"] for r in cil if r["question_id"] == qid}
        assert got.keys() == expected.keys()
        assert max(abs(got[a] - expected[a]) for a in got) <= 1e-12
        direct_split = "L1" if sum(v > 0 for v in expected.values()) >= 2 else "L2"
        assert questions[qid]["split"] == direct_split
    for row in t["joint_tables"].to_pylist():
        assert row["pi"] is not None and 0 <= row["pi"] <= 1
    pis = {}
    for row in t["joint_tables"].to_pylist():
        pis.setdefault((row["question_id"], row["bin"]), []).append(row["pi"])
    assert pis and all(math.isclose(sum(v), 1.0) for v in pis.values())
    items = t["eval_items"]
    assert items.schema == EVAL_ITEM_SCHEMA and items.num_rows == len(questions)
    for item in items.to_pylist():
        assert item["t_cut"] == dt.datetime.combine(dates[item["item_id"]], MIDNIGHT)
        assert item["split"] == questions[item["item_id"]]["split"]
        scores = {r["article_id"]: r["cil"] for r in cil if r["question_id"] == item["item_id"]}
        assert item["context_scores"] == [scores[a] for a in item["context_article_ids"]] and scores
    card = storage.read_json(Layout(root).benchmark("prophet", "dataset_card.json"))
    assert card["counts"]["questions"] == 2 and card["prompt_versions"]
    assert card["counts"]["corpus_articles_searchable"] == len(ARTICLE_DATES) - 2
    assert card["counts"]["corpus_articles_not_searchable"] == {"no_usable_date": 1, "near_duplicate": 1}
    back = storage.read_table(Layout(root).benchmark("prophet", "questions"))
    assert sorted(back.column("question_id").to_pylist()) == sorted(questions)


ANSWERS = {"strike-ends": 1, "strike-spreads": 0}
DATES = {"strike-ends": D1, "strike-spreads": D2}
