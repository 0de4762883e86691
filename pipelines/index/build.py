"""Build or update ``ROOT/index/articles`` from ``corpus/articles`` (a Ray job).

    python -m pipelines.index --root ROOT
    ray job submit --working-dir . -- python -m pipelines.index --root s3://bucket/augury --embed-gpus 1

Steps (named in the logs as ``stage=…``):

1. **plan**: list the dated ``published_date`` partitions of ``corpus/articles`` with their files
   and sizes and compare them with the partitions the index was built from
   (``_partitions.json`` beside the table). Only new or changed partitions are read; a partition
   that is gone is deleted from the index; an unchanged corpus writes nothing.
2. **embed**: Ray Data reads the changed partitions (the needed columns only), turns each batch
   into index documents (``udfs.index_docs``) and embeds them with MiniLM in ``map_batches`` on an
   actor pool (``--embed-actors``; ``--embed-gpus`` per actor on a GPU cluster).
3. **write**: the rows of the changed partitions are deleted, the new ones appended batch by
   batch as they stream out of Ray Data (the driver holds one batch; a batch appended twice by
   a retried writer fails the run) and, for the articles table, the strict statistics of each
   changed day counted whole (``statistics``); then the indexes are brought up to date: full-text (BM25)
   on ``text`` and on ``title`` (``bm25_title``; a table built before it gets it on the next run,
   changed partitions or not), a B-tree on ``published_at``, and an IVF-PQ vector index once the table has
   ``ANN_MIN_ROWS`` rows (exact search below that), trained again whenever the table has grown
   ``ANN_REGROWTH``-fold since its last training (new rows are folded into the old partitions).
4. **record**: the partition list is written last, so an interrupted run redoes its partitions.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict

import pyarrow as pa
import pyarrow.fs as pafs

from pipelines.index.config import Config
from pipelines.index.statistics import (
    STATISTICS_TABLES,
    append_statistics,
    delete_days,
    delete_rows,
    index_statistics,
)
from pipelines.index.tables import (
    STORAGE_VERSION,
    TABLE,
    connect,
    has_index,
    has_title_index,
    passage_table,
    worker_env,
)
from udfs import storage
from udfs.index_docs import ARTICLE_COLUMNS, check_partitions, documents, index_schema, passages
from udfs.layout import Layout
from udfs.report import Progress, RunSummary
from udfs.schemas import ARTICLES, HIVE_NULL

log = logging.getLogger("augury.index")
ANN_MIN_ROWS = 100_000  # below this, exact vector search is fast enough and exact
ANN_REGROWTH = 4  # the vector index is trained again once the table has grown 4-fold since its training
TRAINED_ROWS = "augury:ivf_trained_rows"  # metadata of the vector column: rows at the last training
MANIFEST = "_partitions.json"


def partitions(articles_uri: str) -> dict[str, tuple[str, list[str]]]:
    """Dated partitions of the articles table: day → (fingerprint of its files, file URIs)."""
    fs, path = storage.filesystem(articles_uri)
    files: dict[str, list[pafs.FileInfo]] = defaultdict(list)
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
            continue
        part = info.path[len(path) :].strip("/").split("/")[0]
        if part.startswith("published_date=") and part != f"published_date={HIVE_NULL}":
            files[part.split("=", 1)[1]].append(info)
    out = {}
    for day, infos in files.items():
        names = sorted((i.path[len(path) :], i.size) for i in infos)
        digest = hashlib.sha256(json.dumps(names).encode()).hexdigest()[:16]
        out[day] = (digest, [storage.join(articles_uri, n.strip("/")) for n, _ in names])
    return out


class Embedder:
    """Ray Data actor: index documents (articles, or passages of ``passage_words``) of a batch of
    articles, with their embeddings."""

    def __init__(self, encoder: str, lead_words: int, passage_words: int | None, batch_size: int) -> None:
        from udfs.embeddings import HASHING, load_encoder

        if not HASHING.fullmatch(encoder):
            load_encoder(encoder)
        self.encoder, self.lead_words, self.batch_size = encoder, lead_words, batch_size
        self.passage_words = passage_words

    def __call__(self, batch: pa.Table) -> pa.Table:
        from udfs.embeddings import embed

        batch = check_partitions(batch)
        if self.passage_words is None:
            docs = documents(batch, self.lead_words)
        else:
            docs = passages(batch, self.passage_words)
        vectors = embed(docs["text"].to_pylist(), self.encoder, self.batch_size)
        dim = vectors.shape[1]
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), dim)
        return docs.append_column(pa.field("vector", column.type, nullable=False), column)


def run(config: Config) -> RunSummary:
    """Bring the index of ``config.root`` up to date with its articles table."""
    layout = Layout(config.root)
    layout.require(ARTICLES)
    summary = RunSummary("index: articles")
    current = partitions(layout.table(ARTICLES))
    db = connect(config.root)
    exists = has_index(config.root)
    if exists:
        _check_encoder(db.open_table(TABLE), config.encoder)
    manifest_uri = storage.join(layout.index(), MANIFEST)
    built = storage.read_json(manifest_uri) if exists and storage.exists(manifest_uri) else {}
    tables = [TABLE, *(passage_table(n) for n in config.passage_words)]
    missing = [t for t in tables if t not in db.list_tables().tables]
    untitled = [t for t in tables if t not in missing and not has_title_index(db.open_table(t))]
    changed = sorted(d for d, (fp, _) in current.items() if built.get(d) != fp)
    gone = sorted(set(built) - set(current))
    log.info(
        "stage=plan %d dated partitions, %d new or changed, %d gone; tables to create: %s; "
        "title indexes to add: %s",
        len(current),
        len(changed),
        len(gone),
        ", ".join(missing) or "none",
        ", ".join(untitled) or "none",
    )
    summary.metrics.update(
        {"partitions": len(current), "partitions changed": len(changed), "partitions gone": len(gone)}
    )
    if not changed and not gone and not missing and not untitled:
        summary.notes.append("the index is up to date: nothing written")
        return _finish(summary, db)
    for name in tables:
        days = sorted(current) if name in missing else changed
        if days or gone:
            _update(db, name, days, gone, current, config, summary)
        elif name in untitled:  # an index built before bm25_title: its title index only
            _in_worker(_index, config.root, name, False)
    storage.write_json(manifest_uri, {d: fp for d, (fp, _) in current.items()})
    return _finish(summary, db)


def _update(db, name: str, days: list[str], gone: list[str], current: dict, config: Config, summary) -> None:
    """Delete the rows of ``days`` and ``gone`` from table ``name`` (and, for the articles table,
    from its statistics), then add the documents of ``days``."""
    existing = set(db.list_tables().tables)
    if name in existing:
        delete_rows(db.open_table(name), days + gone)
    if name == TABLE:
        delete_days(db, days + gone)
    files = [f for d in days for f in current[d][1]]
    words = None if name == TABLE else int(name.rsplit("_", 1)[1])
    if files:
        _append(name, files, words, config, summary)
        if name == TABLE:
            _statistics({d: current[d][1] for d in days}, config, summary)
    if name in connect(config.root).list_tables().tables:
        _in_worker(_index, config.root, name, name not in existing)


class Writer:
    """Ray Data actor (one per table and run): appends the embedded batches to table ``name``,
    creating it on the first batch, and passes on only row counts, so the driver never holds
    articles."""

    def __init__(self, root: str, name: str, encoder: str) -> None:
        self.root, self.name, self.encoder, self.table = root, name, encoder, None

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self.table is None:
            db = connect(self.root)
            if self.name in db.list_tables().tables:
                self.table = db.open_table(self.name)
            else:
                schema = index_schema(
                    batch.schema.field("vector").type.list_size, passages=self.name != TABLE
                )
                self.table = db.create_table(
                    self.name,
                    schema=schema.with_metadata({"encoder": self.encoder}),
                    data_storage_version=STORAGE_VERSION,
                )
        self.table.add(batch.cast(self.table.schema))
        return pa.table({"rows": [batch.num_rows]})


def _append(name: str, files: list[str], words: int | None, config: Config, summary: RunSummary) -> None:
    """Stream the changed partitions through Ray Data into table ``name``: read, make documents
    and embed them (actor pool), append (one writer actor)."""
    import ray

    _ensure_ray()
    context = ray.data.DataContext.get_current()
    # Rows go in in day order (the files are listed by day), so the rows before a cutoff are
    # mostly a prefix of the table: the B-tree prefilter of a search builds its row set faster.
    context.execution_options.preserve_order = True
    context.raise_original_map_exception = True  # a misfiled article's InputError, not a wrapper
    fs, _ = storage.filesystem(files[0])
    paths = [storage.filesystem(f)[1] for f in files]
    ds = ray.data.read_parquet(
        paths, filesystem=fs, columns=ARTICLE_COLUMNS, partitioning=None, include_paths=True
    )
    read = ds.count()
    embedded = ds.map_batches(
        Embedder,
        fn_constructor_args=(config.encoder, config.lead_words, words, config.batch_size),
        batch_size=config.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=config.embed_actors),
        num_gpus=config.embed_gpus or None,
    )
    counts = embedded.map_batches(
        Writer,
        fn_constructor_args=(config.root, name, config.encoder),
        batch_size=config.batch_size * 4,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
        # the one writer mostly waits on storage; holding a CPU, it left a 2-CPU cluster none for
        # the read tasks, and the job waited forever
        num_cpus=0,
        runtime_env=worker_env(),
    )
    before = _rows(connect(config.root), name)
    written = 0
    # of the rows read; undated ones are not written, so a corpus with some ends short of its total
    bar = Progress(f"stage=embed table={name} rows written", read if words is None else None, log)
    try:
        for batch in counts.iter_batches(batch_size=None, batch_format="pyarrow"):
            rows = sum(batch["rows"].to_pylist())
            written += rows
            bar.update(rows)
    finally:
        bar.close()
    _check_appended(name, _rows(connect(config.root), name) - before, written)
    if words is None:
        summary.rows_read, summary.rows_written = read, written
        if read > written:
            summary.reject("undated", read - written)
    else:
        summary.metrics[f"{name} rows written"] = written


def _statistics(days: dict[str, list[str]], config: Config, summary: RunSummary) -> None:
    """Strict BM25's statistics of the changed ``days`` (day → its files), a whole day per row."""
    before = {name: _rows(connect(config.root), name) for name in STATISTICS_TABLES}
    written = append_statistics(config.root, days, config.lead_words, worker_env())
    for name in STATISTICS_TABLES:
        _check_appended(name, _rows(connect(config.root), name) - before[name], written[name])
    summary.metrics["term_days rows written"] = written["term_days"]


def _check_appended(name: str, appended: int, written: int) -> None:
    """Ray Data restarts a failed writer and retries its batch, which may already be appended:
    duplicate rows fail the run before its partition list is written, so a rerun redoes them."""
    if appended != written:
        raise SystemExit(
            f"stage=write table={name}: {appended} rows appended for {written} written (a retried "
            "batch was appended twice); the index's partition list is left as it was: rerun the "
            "job to redo these partitions"
        )


def _rows(db, name: str) -> int:
    """Rows in table ``name`` of ``db`` (0 while it does not exist)."""
    return db.open_table(name).count_rows() if name in db.list_tables().tables else 0


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


def _index(root: str, name: str, created: bool) -> None:
    """Create the indexes of a new table (after merging the fragments its batches made); fold new
    rows into them on an existing one. For the articles table, the statistics' B-trees too."""
    from lancedb.index import FTS, BTree, IvfPq

    db = connect(root)
    table = db.open_table(name)
    rows = table.count_rows()
    if created or not table.list_indices():
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
    if name == TABLE:
        index_statistics(root)
    log.info("stage=write %s: indexes up to date over %d rows", name, rows)


def trained_rows(table) -> int:
    """The rows a table's vector index was last trained over (0: none, exact search)."""
    return int((table.schema.field("vector").metadata or {}).get(TRAINED_ROWS.encode(), 0))


def _finish(summary: RunSummary, db) -> RunSummary:
    names = db.list_tables().tables
    summary.metrics["rows in the index"] = _rows(db, TABLE)
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
