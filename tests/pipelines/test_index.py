"""The article index (LanceDB) and its search: cutoff probes in every mode and for every form of
cutoff, on a local root and on the moto S3 server; incremental reruns; the leak assertion; the
search command line; above a size threshold, the IVF-PQ index."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from pipelines import search
from pipelines.index import build as index_build
from pipelines.index import embed, engine
from pipelines.index.__main__ import main as index_main
from pipelines.index.build import run
from pipelines.index.config import Config
from pipelines.index.engine import MODES, ArticleIndex
from pipelines.index.manifest import MANIFEST
from pipelines.index.tables import connect
from tests.fixtures.evaluate.data import write_articles
from udfs import embeddings as embedding
from udfs.retrieval import LeakageError

T = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)
MIDNIGHT = dt.datetime(2024, 3, 5, tzinfo=dt.UTC)
TEXT = "The zeppelin hangar at the harbour reopened after the storm; zeppelin flights resume."
PROBES = [
    ("at-cutoff", T, "Zeppelin hangar reopens", TEXT),
    ("just-before", T - dt.timedelta(microseconds=1), "Zeppelin hangar to reopen", TEXT),
    ("undated", None, "Zeppelin hangar, undated note", TEXT),
    ("week-before", T - dt.timedelta(days=7), "Storm hits the zeppelin hangar", TEXT),
    ("at-midnight", MIDNIGHT, "Zeppelin flights resume", TEXT),
    ("before-midnight", MIDNIGHT - dt.timedelta(microseconds=1), "Zeppelin flights to resume", TEXT),
    ("other", T - dt.timedelta(days=30), "Council budget vote", "The council voted on the harbour budget."),
]
CUTOFFS = {
    "aware UTC": (T, {"just-before", "week-before"}),
    "aware +02:00": (T.astimezone(dt.timezone(dt.timedelta(hours=2))), {"just-before", "week-before"}),
    "naive (UTC)": (T.replace(tzinfo=None), {"just-before", "week-before"}),
    "date (midnight UTC)": (MIDNIGHT.date(), {"just-before", "week-before", "at-cutoff", "before-midnight"}),
}


# The probes test cutoffs, not similarity (k covers every eligible article), so they are embedded
# by the model-free encoder; the bundled one is built and searched by the toy_index and
# corpus_root fixtures and test_evaluate_queries.
ENCODER = "hashing-384"


def build(root: str, passage_words: tuple[int, ...] = ()) -> None:
    """Write the probes and index them (the probes search whole articles; passage tables only
    where a test asks for them: each table is a Ray Data run of its own)."""
    write_articles(root, PROBES)
    run(Config(root=root, encoder=ENCODER, passage_words=passage_words))


@pytest.fixture(scope="module")
def local_root(tmp_path_factory, ray_local) -> str:
    root = str(tmp_path_factory.mktemp("index"))
    build(root)
    return root


def probe(root: str) -> None:
    index = ArticleIndex(root)
    # tfidf has its own probes (test_index_forecastqa): DrQA's idf is 0 for a term in half the
    # window's articles or more, as "zeppelin" and "hangar" are here
    for mode, strict in [*((m, False) for m in MODES if m != "tfidf"), ("bm25", True), ("hybrid", True)]:
        for form, (cutoff, expected) in CUTOFFS.items():
            hits = index.search("zeppelin hangar", cutoff, k=10, mode=mode, strict=strict)
            zeppelin = {h.doc_id for h in hits} - {"other"}
            assert zeppelin == expected, (mode, strict, form)
            assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
            assert all(h.score >= n.score for h, n in itertools.pairwise(hits)), (mode, strict, form)
        # many searches at once (concurrent in the engine for bm25 and dense) find the same hits
        cutoffs = [cutoff for cutoff, _ in CUTOFFS.values()]
        many = index.search_many([("zeppelin hangar", c, None) for c in cutoffs], 10, mode, strict)
        one_by_one = [index.search("zeppelin hangar", c, 10, mode, strict=strict) for c in cutoffs]
        assert [[h.doc_id for h in hits] for hits in many] == [
            [h.doc_id for h in hits] for hits in one_by_one
        ]
        bare = index.search_many(
            [("zeppelin hangar", c, None) for c in cutoffs], 10, mode, strict, text=False
        )
        assert [[h.doc_id for h in hits] for hits in bare] == [[h.doc_id for h in hits] for hits in many]
        assert all(h.text is None and h.title is None for h in itertools.chain(*bare)) or strict
        for a, b in zip(itertools.chain(*many), itertools.chain(*one_by_one), strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-5) and a.published_at == b.published_at


def test_cutoff_probes_in_every_mode(local_root):
    probe(local_root)


def test_since_and_exclude_act_inside_the_query(local_root):
    index = ArticleIndex(local_root)
    hits = index.search("zeppelin", MIDNIGHT, k=2, mode="bm25", exclude={"before-midnight"})
    assert len(hits) == 2 and "before-midnight" not in {h.doc_id for h in hits}  # still a full top-k
    since = T - dt.timedelta(days=1)
    assert {h.doc_id for h in index.search("zeppelin", MIDNIGHT, 10, "dense", since=since)} == {
        "just-before",
        "at-cutoff",
        "before-midnight",
    }


def test_within_counts_and_the_articles_of_a_working_set(local_root):
    index = ArticleIndex(local_root)
    within = {"at-cutoff", "just-before", "undated", "other"}
    assert {h.doc_id for h in index.search("zeppelin", MIDNIGHT, 10, "bm25", within=within)} == {
        "at-cutoff",
        "just-before",
    }
    assert index.search("zeppelin", MIDNIGHT, 10, "bm25", within=set()) == []
    assert index.count(T) == 3 and index.count(MIDNIGHT) == 5
    assert index.count(MIDNIGHT, exclude={"other"}, within=within) == 2
    rows = index.articles(["at-cutoff", "undated", "missing"], ["article_id", "title"])
    assert dict(zip(rows["article_id"].to_pylist(), rows["title"].to_pylist(), strict=True)) == {
        "at-cutoff": "Zeppelin hangar reopens",
        "undated": "Zeppelin hangar, undated note",
    }


def test_a_hit_at_or_after_its_cutoff_is_never_returned(local_root, monkeypatch):
    monkeypatch.setattr(engine, "eligible", lambda *a, **k: "true")  # the prefilter lost
    with pytest.raises(LeakageError):
        ArticleIndex(local_root).search("zeppelin hangar", T, k=10, mode="bm25")
    for mode in ("bm25", "dense"):  # the concurrent path checks every hit too
        with pytest.raises(LeakageError):
            ArticleIndex(local_root).search_many([("zeppelin hangar", T, None)], 10, mode)


def files(root: str) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in Path(root, "index").rglob("*") if p.is_file()}


def test_a_rerun_writes_nothing_and_a_new_day_adds_only_its_articles(tmp_path, ray_local):
    root, config = str(tmp_path), Config(root=str(tmp_path), encoder=ENCODER, passage_words=(100,))
    build(root, config.passage_words)
    before = files(root)
    unchanged = run(config)
    assert files(root) == before and unchanged.rows_written == 0
    assert unchanged.metrics["partitions changed"] == 0
    late = (
        "late",
        T + dt.timedelta(days=20),
        "Zeppelin museum opens",
        "A zeppelin museum opened by the harbour.",
    )
    write_articles(root, [late])
    added = run(config)
    assert (added.metrics["partitions changed"], added.rows_read, added.rows_written) == (1, 1, 1)
    assert added.metrics["rows in the index"] == len(PROBES)  # 6 dated + the new one
    assert added.metrics["passages_100 rows written"] == 1  # the passage table follows, one passage
    hits = ArticleIndex(root).search("zeppelin museum", T + dt.timedelta(days=30), k=1, mode="bm25")
    assert [h.doc_id for h in hits] == ["late"]
    rewritten = ("late-v2", late[1], "Airship museum opens", "An airship museum opened by the quay.")
    write_articles(root, [rewritten])  # the same day's partition, replaced
    changed = run(config)
    assert (changed.metrics["partitions changed"], changed.rows_written) == (1, 1)
    assert changed.metrics["rows in the index"] == changed.metrics["rows in passages_100"] == len(PROBES)
    hits = ArticleIndex(root).search("museum", T + dt.timedelta(days=30), k=10, mode="bm25")
    assert [h.doc_id for h in hits] == ["late-v2"]


class NoActor(embed.Embedder):
    """An embedding actor that cannot start: a run that needs one fails."""

    def __init__(self, *args) -> None:
        raise RuntimeError("an embedding actor was started")


def test_a_hashing_encoder_embeds_in_tasks_and_a_model_in_actors(tmp_path, ray_local, monkeypatch):
    """The model-free encoder needs no actor (one would start a process for milliseconds of
    hashing); its vectors are the encoder's own. A model encoder still loads in an actor."""
    monkeypatch.setattr(embed, "Embedder", NoActor)
    root = str(tmp_path / "hashing")
    build(root, (100,))
    table = connect(root).open_table("articles").to_arrow()
    expected = embedding.embed(table["text"].to_pylist(), ENCODER)
    assert table.num_rows == len(PROBES) - 1  # the dated articles
    assert np.array_equal(np.stack(table["vector"].to_numpy(False)), expected)
    write_articles(str(tmp_path / "model"), PROBES[:1])
    with pytest.raises(Exception, match="an embedding actor was started"):
        run(Config(root=str(tmp_path / "model"), passage_words=()))


def test_a_batch_appended_twice_fails_the_run_and_the_rerun_repairs_it(tmp_path, ray_local, monkeypatch):
    """Ray retries an append whose worker died, and its batch may be in the table already: the
    run fails before recording its partitions, and the next one leaves each article once."""
    root = str(tmp_path)
    write_articles(root, PROBES)
    once = embed.append

    def retried(rows, **kwargs):  # a local function: Ray ships it by value
        once(rows, **kwargs)
        return once(rows, **kwargs)

    monkeypatch.setattr(embed, "append", retried)
    with pytest.raises(SystemExit, match="appended twice"):
        run(Config(root=root, encoder=ENCODER, passage_words=()))
    monkeypatch.undo()
    summary = run(Config(root=root, encoder=ENCODER, passage_words=()))
    ids = ArticleIndex(root).table.search().select(["article_id"]).limit(100).to_arrow()["article_id"]
    dated = sorted(a for a, published, _, _ in PROBES if published)
    assert sorted(ids.to_pylist()) == dated and summary.rows_written == len(dated)


def test_an_article_filed_under_another_day_fails_the_run_and_records_nothing(tmp_path, ray_local, capsys):
    """An importer that files by local date puts 23:30 at -02:00 (01:30 UTC the next day) under
    the earlier day: indexed, it would outlive a rewrite or removal of its partition. The job
    ends with one line naming the article and its file, and status 2."""
    root = str(tmp_path)
    evening = dt.datetime(2024, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))
    write_articles(root, [*PROBES, ("misfiled", evening, "Zeppelin gala", TEXT)])
    with pytest.raises(SystemExit) as stopped:
        index_main(["--root", root, "--passage-words", ""])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(
        r"python -m pipelines.index: error: 1 article\(s\) sit in a partition other than their UTC "
        r"publication day, e.g. misfiled published 2024-03-02T01:30:00\+00:00 in "
        r".*/published_date=2024-03-01/[^/]+\.parquet: .*then rerun the index job",
        last,
    )
    assert not Path(root, "index", "articles", MANIFEST).exists()  # a rerun redoes every partition


@pytest.mark.s3
def test_cutoff_probes_on_s3(s3_root, ray_local):
    build(s3_root, passage_words=(100,))
    probe(s3_root)
    assert run(Config(root=s3_root, encoder=ENCODER, passage_words=(100,))).rows_written == 0


def test_search_command_line(local_root, tmp_path, capsys):
    search.main(["--root", local_root, "--cutoff", "2024-03-01T12:00:00", "--mode", "bm25", "zeppelin"])
    out = capsys.readouterr().out
    assert "2 hits before 2024-03-01T12:00:00+00:00 (bm25)" in out and "Zeppelin hangar to reopen" in out
    assert "Zeppelin hangar reopens" not in out
    (tmp_path / "corpus").mkdir()
    with pytest.raises(SystemExit) as done:
        search.main(["--root", str(tmp_path), "--cutoff", "2024-03-01", "zeppelin"])
    assert done.value.code == 2 and "python -m pipelines.index" in capsys.readouterr().err


def test_asking_for_an_index_creates_nothing(tmp_path):
    assert not engine.has_index(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_an_ann_index_above_the_threshold_keeps_the_cutoff(tmp_path, ray_local, monkeypatch, caplog):

    root, words = str(tmp_path), ["harbour", "council", "storm", "budget", "zeppelin", "museum", "vote"]
    articles = [  # 300 articles over ten days: enough rows to train IVF-PQ's 256 codes
        (
            f"a{i}",
            T + dt.timedelta(hours=i * 0.8),
            f"Story {i}",
            " ".join(words[(i * j) % 7] for j in range(12)),
        )
        for i in range(300)
    ]
    write_articles(root, articles)
    run(Config(root=root, encoder="hashing-384", passage_words=()))
    assert "IvfPq" not in {i.index_type for i in ArticleIndex(root).table.list_indices()}
    monkeypatch.setattr(index_build, "ANN_MIN_ROWS", 256)
    index_build._index(root, engine.TABLE)  # what the job's worker runs after a write
    index = ArticleIndex(root)
    (ann,) = [i for i in index.table.list_indices() if i.index_type == "IvfPq"]
    write_articles(root, [("new", T + dt.timedelta(days=11), "Storm", "storm harbour storm harbour")])
    run(Config(root=root, encoder="hashing-384", passage_words=()))
    index_build._index(root, engine.TABLE)  # a later run folds rows in, trains nothing
    (again,) = [i for i in ArticleIndex(root).table.list_indices() if i.index_type == "IvfPq"]
    assert again.index_uuid == ann.index_uuid and (again.num_indexed_rows, again.num_unindexed_rows) == (
        301,
        0,
    )
    assert index_build.trained_rows(ArticleIndex(root).table) == 300
    monkeypatch.setattr(index_build, "ANN_REGROWTH", 1.002)  # 301 rows: grown enough to train again
    caplog.set_level(logging.INFO, logger="augury.index")
    for _ in range(2):  # the second time it has not grown since: folded in, not trained
        index_build._index(root, engine.TABLE)
    assert index_build.trained_rows(ArticleIndex(root).table) == 301
    assert sum("vector index trained over 301 rows" in r.message for r in caplog.records) == 1
    summary = run(Config(root=root, encoder="hashing-384", passage_words=()))
    assert summary.metrics["articles: vector index trained over"] == 301
    cutoff = T + dt.timedelta(days=5)
    hits = ArticleIndex(root).search("storm over the harbour", cutoff, k=10, mode="dense")
    assert len(hits) == 10 and all(h.published_at < cutoff for h in hits)
