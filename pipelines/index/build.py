"""Build or update ``ROOT/index/articles`` from ``corpus/articles`` (a Ray job).

    python -m pipelines.index --root ROOT
    ray job submit --working-dir . -- python -m pipelines.index --root s3://bucket/augury --embed-gpus 1

Steps (named in the logs as ``stage=…``):

1. **plan**: list the dated ``published_date`` partitions of ``corpus/articles`` with their files
   and sizes and compare them, table by table, with the days each table holds whole
   (``manifest``). Only new or changed partitions are read; a partition that is gone is deleted
   from the index; an unchanged corpus writes nothing. A day an interrupted run began keeps the
   rows it has when its files are the same: the rerun embeds only the documents missing.
2. **embed**: Ray Data reads the partitions (the needed columns only), turns them into index
   documents (``udfs.index_docs``) in blocks of at most ``--batch-size`` documents and embeds
   them on an actor pool (``--embed-actors``; ``--embed-gpus`` per actor on a GPU cluster; a
   model-free hashing encoder in tasks): ``embed``.
3. **write**: the rows of the changed partitions are deleted, the new ones appended as they
   stream out of Ray Data (the driver holds counts, never articles), and the days written are
   checked and recorded every tenth of the work (a batch appended twice by a retried append
   fails the run); for the articles table, the strict statistics of the changed days are counted
   whole, several days a task (``statistics``); then the indexes are brought up to date:
   full-text (BM25) on ``text`` and on ``title`` (``bm25_title``; a table built before it gets
   it on the next run, changed partitions or not), B-trees on ``published_at`` and
   ``article_id``, and an IVF-PQ vector index once the table has ``ANN_MIN_ROWS`` rows (exact
   search below that), trained again whenever the table has grown ``ANN_REGROWTH``-fold since
   its last training (new rows are folded into the old partitions). A table whose indexes an
   interrupted run left behind is indexed by the next one.
"""

from __future__ import annotations

import logging

from pipelines.index.config import Config
from pipelines.index.embed import Work, stream
from pipelines.index.manifest import STATISTICS, Partition, Record, partitions
from pipelines.index.statistics import STATISTICS_TABLES, delete_days, delete_rows, index_statistics
from pipelines.index.tables import TABLE, connect, has_title_index, has_vectors, passage_table, worker_env
from udfs.layout import Layout
from udfs.report import RunSummary
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.index")
ANN_MIN_ROWS = 100_000  # below this, exact vector search is fast enough and exact
ANN_REGROWTH = 4  # the vector index is trained again once the table has grown 4-fold since its training
TRAINED_ROWS = "augury:ivf_trained_rows"  # metadata of the vector column: rows at the last training


def run(config: Config) -> RunSummary:
    """Bring the index of ``config.root`` up to date with its articles table."""
    layout = Layout(config.root)
    layout.require(ARTICLES)
    summary = RunSummary("index: articles")
    current = partitions(layout.table(ARTICLES))
    db = connect(config.root)
    names = set(db.list_tables().tables)
    if TABLE in names:
        _check_encoder(db.open_table(TABLE), config.encoder)
    indexed = sorted(n for n in names if n == TABLE or n.startswith("passages_")) if TABLE in names else []
    record = Record.load(layout.index(), indexed)
    tables = [TABLE, *(passage_table(n) for n in config.passage_words)]
    # a passage table asked with vectors that has none is built again; one that has them keeps them
    rebuilt = [
        t
        for t in map(passage_table, config.passage_vectors)
        if t in names and not has_vectors(db.open_table(t))
    ]
    vectors = {TABLE, *map(passage_table, config.passage_vectors)}
    vectors |= {t for t in tables[1:] if t in names and has_vectors(db.open_table(t))}
    for name in rebuilt:
        db.drop_table(name)
        record.forget(name)
        names.discard(name)
    stats = set(STATISTICS_TABLES) <= names
    work = {
        t: record.days(t, current, t in names if t != STATISTICS else stats) for t in [*tables, STATISTICS]
    }
    untitled = [t for t in tables if t in names and not has_title_index(db.open_table(t))]
    behind = sorted(record.unindexed & {*tables, STATISTICS})
    fresh, resume, gone = work[TABLE]
    log.info(
        "stage=plan %d dated partitions, %d new or changed, %d to resume, %d gone; tables to create: "
        "%s (vectors: %s); title indexes to add: %s; indexes left behind by an interrupted run: %s",
        len(current),
        len(fresh),
        len(resume),
        len(gone),
        ", ".join(t for t in tables if t not in names) or "none",
        ", ".join(t for t in tables if t in vectors),
        ", ".join(untitled) or "none",
        ", ".join(behind) or "none",
    )
    summary.metrics.update(
        {
            "partitions": len(current),
            "partitions changed": len(fresh) + len(resume),
            "partitions gone": len(gone),
        }
    )
    if not any(any(w) for w in work.values()) and not untitled and not behind:
        summary.notes.append("the index is up to date: nothing written")
        return _finish(summary, db)
    adding = {
        name: _start(record, db, name, *days, names, current) for name, days in work.items() if any(days)
    }
    adding = {name: want for name, want in adding.items() if want.days}
    if adding:
        _ensure_ray()
        wanted = {d: current[d] for want in adding.values() for d in want.days}
        streamed = stream(record, config.root, adding, wanted, frozenset(vectors), config)
        _report(summary, streamed, adding, vectors)
    todo = [n for n in [*tables, STATISTICS] if any(work[n]) or n in untitled or n in behind]
    _in_worker(_index_all, config.root, todo)
    for name in todo:
        record.indexed(name)
    return _finish(summary, db)


def _start(
    record: Record,
    db,
    name: str,
    fresh: list[str],
    resume: list[str],
    gone: list[str],
    names: set[str],
    current: dict[str, Partition],
) -> Work:
    """Delete the rows of ``fresh`` and ``gone`` days from table ``name`` (the statistics: of every
    day to count, counting is cheap), record the days begun, and return what the stream adds:
    the documents of ``fresh`` and ``resume`` days (of a resumed day, those not in the table)."""
    todo = sorted(fresh + resume)
    if name == STATISTICS:
        delete_days(db, todo + gone)
    elif name in names:
        delete_rows(db.open_table(name), fresh + gone)
    record.start(name, {d: current[d].fingerprint for d in todo}, gone)
    if not todo:
        record.finish(name, {})
    words = int(name.rsplit("_", 1)[1]) if name.startswith("passages_") else None
    kept = frozenset(resume) if name in names and name != STATISTICS else frozenset()
    return Work(frozenset(todo), kept, words)


def _report(
    summary: RunSummary, streamed: dict[str, int], adding: dict[str, Work], vectors: set[str]
) -> None:
    """The stream's counts in the run summary."""
    for name in adding:
        if name == STATISTICS:
            summary.metrics["term_days rows written"] = streamed["term_days"]
        elif name in vectors:
            summary.metrics[f"{name} documents embedded"] = streamed[f"{name} embedded"]
        if name.startswith("passages_"):
            summary.metrics[f"{name} rows written"] = streamed[name]
    if TABLE in adding:
        summary.rows_read, summary.rows_written = streamed["read"], streamed[TABLE]
        if streamed["read"] > streamed[TABLE]:
            summary.reject("undated", streamed["read"] - streamed[TABLE])


def _ensure_ray() -> None:
    from pipelines.llm.config import LLMConfig
    from pipelines.llm.ray_env import ensure_ray

    ensure_ray(LLMConfig())


def _in_worker(fn, *args) -> None:
    """Run ``fn(*args)`` as a Ray task, so what it loads (index builders hold the text or the
    vectors of a whole table) stays out of the driver."""
    import ray

    _ensure_ray()
    ray.get(ray.remote(fn).options(runtime_env=worker_env(), max_retries=0).remote(*args))


def _index_all(root: str, names: list[str]) -> None:
    """Bring the indexes of the tables ``names`` (``statistics``: its two tables) up to date, in one
    worker."""
    existing = set(connect(root).list_tables().tables)
    for name in names:
        if name == STATISTICS:
            index_statistics(root)
        elif name in existing:
            _index(root, name)


def _check_encoder(table, encoder: str) -> None:
    """Refuse to mix embeddings of two encoders in one table."""
    built = table.schema.metadata.get(b"encoder", b"").decode()
    if built != encoder:
        raise SystemExit(
            f"the index at this root was built with --encoder {built}; rerun with it, or delete "
            f"the index to rebuild with {encoder}"
        )


def _index(root: str, name: str) -> None:
    """Create the indexes of a new table (after merging the fragments its batches made); fold new
    rows into them on an indexed one."""
    from lancedb.index import FTS, BTree, IvfPq

    db = connect(root)
    table = db.open_table(name)
    rows = table.count_rows()
    if not table.list_indices():
        table.optimize()
        table.create_index("text", config=FTS(), replace=True)
        for column in ["published_at", "article_id"] + ["passage_id"] * (name != TABLE):
            table.create_index(column, config=BTree(), replace=True)
    else:
        table.optimize()
    if not has_title_index(table):
        # ForecastQA's title field: ES's simple analyzer (lowercased, no stemming, no stop words)
        table.create_index("title", config=FTS(stem=False, remove_stop_words=False), replace=True)
    # Folding rows in keeps the partitions trained on the rows there were, so the vector index is
    # trained again each time the table has grown ANN_REGROWTH-fold since (partitions ∝ √rows:
    # each training doubles them; the total work stays a constant times the last one's)
    if has_vectors(table) and rows >= max(ANN_MIN_ROWS, ANN_REGROWTH * trained_rows(table)):
        table.create_index(
            "vector",
            config=IvfPq(distance_type="cosine", num_partitions=max(1, int(rows**0.5))),
            replace=True,
        )
        table.update_field_metadata({"path": "vector", "metadata": {TRAINED_ROWS: str(rows)}})
        log.info("stage=write %s: vector index trained over %d rows", name, rows)
    log.info("stage=write %s: indexes up to date over %d rows", name, rows)


def trained_rows(table) -> int:
    """The rows a table's vector index was last trained over (0: none, exact search)."""
    return int((table.schema.field("vector").metadata or {}).get(TRAINED_ROWS.encode(), 0))


def _finish(summary: RunSummary, db) -> RunSummary:
    names = db.list_tables().tables
    summary.metrics["rows in the index"] = db.open_table(TABLE).count_rows() if TABLE in names else 0
    for name in sorted(n for n in names if n == TABLE or n.startswith("passages_")):
        table = db.open_table(name)
        if name != TABLE:
            summary.metrics[f"rows in {name}"] = table.count_rows()
        trained = (trained_rows(table) or "- (exact search)") if has_vectors(table) else "- (no vectors)"
        summary.metrics[f"{name}: vector index trained over"] = trained
    summary.notes.append(
        "rows read = articles of the new or changed partitions; undated ones are not indexed"
    )
    summary.finish()
    print(summary.table())
    return summary
