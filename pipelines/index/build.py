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
   them on an actor pool (``--embed-actors``; ``--embed-gpus`` per actor on a GPU cluster):
   ``embed``.
3. **write**: the rows of the changed partitions are deleted, the new ones appended as they
   stream out of Ray Data (the driver holds counts, never articles), and the days written are
   checked and recorded every tenth of the work (a batch appended twice by a retried writer
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
from pipelines.index.embed import append
from pipelines.index.manifest import STATISTICS, Partition, Record, partitions
from pipelines.index.statistics import (
    STATISTICS_TABLES,
    append_statistics,
    count_days,
    delete_days,
    delete_rows,
    index_statistics,
)
from pipelines.index.tables import TABLE, connect, has_title_index, passage_table, worker_env
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
    stats = set(STATISTICS_TABLES) <= names
    work = {
        t: record.days(t, current, t in names if t != STATISTICS else stats) for t in [*tables, STATISTICS]
    }
    untitled = [t for t in tables if t in names and not has_title_index(db.open_table(t))]
    behind = sorted(record.unindexed & {*tables, STATISTICS})
    fresh, resume, gone = work[TABLE]
    log.info(
        "stage=plan %d dated partitions, %d new or changed, %d to resume, %d gone; tables to create: "
        "%s; title indexes to add: %s; indexes left behind by an interrupted run: %s",
        len(current),
        len(fresh),
        len(resume),
        len(gone),
        ", ".join(t for t in tables if t not in names) or "none",
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
    for name in [TABLE, STATISTICS, *tables[1:]]:
        fresh, resume, gone = work[name]
        if fresh or resume or gone:
            _update(record, name, fresh, resume, gone, current, config, summary)
        if fresh or resume or gone or name in untitled or name in behind:
            if name == STATISTICS:
                _in_worker(index_statistics, config.root)
            elif name in connect(config.root).list_tables().tables:
                _in_worker(_index, config.root, name)
            record.indexed(name)
    return _finish(summary, db)


def _update(
    record: Record,
    name: str,
    fresh: list[str],
    resume: list[str],
    gone: list[str],
    current: dict[str, Partition],
    config: Config,
    summary: RunSummary,
) -> None:
    """Delete the rows of ``fresh`` and ``gone`` days from table ``name`` (or the statistics),
    then add the documents of ``fresh`` and ``resume`` days."""
    db = connect(config.root)
    todo = sorted(fresh + resume)
    if name == STATISTICS:  # counting is cheap: an unfinished day is counted again
        delete_days(db, todo + gone)
    elif name in db.list_tables().tables:
        delete_rows(db.open_table(name), fresh + gone)
    record.start(name, {d: current[d].fingerprint for d in todo}, gone)
    if not todo:
        record.finish(name, {})
        return
    _ensure_ray()
    days = {d: current[d] for d in todo}
    if name == STATISTICS:
        written = append_statistics(config.root, days, config.lead_words, worker_env())
        for table in STATISTICS_TABLES:
            _check_appended(table, count_days(connect(config.root).open_table(table), todo), written[table])
        record.finish(name, {d: current[d].fingerprint for d in todo})
        summary.metrics["term_days rows written"] = written["term_days"]
        return
    words = None if name == TABLE else int(name.rsplit("_", 1)[1])
    read, rows, embedded = append(record, config.root, name, words, days, resume, config)
    summary.metrics[f"{name} documents embedded"] = embedded
    if words is None:
        summary.rows_read, summary.rows_written = read, rows
        if read > rows:
            summary.reject("undated", read - rows)
    else:
        summary.metrics[f"{name} rows written"] = rows


def _check_appended(name: str, appended: int, written: int) -> None:
    """Ray Data restarts a failed writer and retries its batch, which may already be appended:
    duplicate rows fail the run before its days are recorded, so a rerun redoes them."""
    if appended != written:
        raise SystemExit(
            f"stage=write table={name}: {appended} rows appended for {written} written (a retried "
            "batch was appended twice); those days are not recorded: rerun the job to redo them"
        )


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
    if rows >= max(ANN_MIN_ROWS, ANN_REGROWTH * trained_rows(table)):
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
        summary.metrics[f"{name}: vector index trained over"] = trained_rows(table) or "- (exact search)"
    summary.notes.append(
        "rows read = articles of the new or changed partitions; undated ones are not indexed"
    )
    summary.finish()
    print(summary.table())
    return summary
