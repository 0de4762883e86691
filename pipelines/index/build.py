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
   batch as they stream out of Ray Data (the driver holds one batch), then the indexes are
   brought up to date: full-text (BM25) on ``text``, a B-tree on ``published_at``, and an IVF-PQ
   vector index once the table has ``ANN_MIN_ROWS`` rows (exact search below that).
4. **record**: the partition list is written last, so an interrupted run redoes its partitions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections import defaultdict

import pyarrow as pa
import pyarrow.fs as pafs

from pipelines.index.config import Config
from pipelines.index.engine import (
    DAY_SIZES_TABLE,
    TABLE,
    TERM_DAYS_TABLE,
    UNDATED,
    connect,
    has_index,
    passage_table,
)
from udfs import storage
from udfs.index_docs import ARTICLE_COLUMNS, documents, index_schema, passages, term_statistics
from udfs.layout import Layout
from udfs.report import RunSummary
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.index")
ANN_MIN_ROWS = 100_000  # below this, exact vector search is fast enough and exact
MANIFEST = "_partitions.json"


def partitions(articles_uri: str) -> dict[str, tuple[str, list[str]]]:
    """Dated partitions of the articles table: day → (fingerprint of its files, file URIs)."""
    fs, path = storage.filesystem(articles_uri)
    files: dict[str, list[pafs.FileInfo]] = defaultdict(list)
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
            continue
        part = info.path[len(path) :].strip("/").split("/")[0]
        if part.startswith("published_date=") and part != f"published_date={UNDATED}":
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
    changed = sorted(d for d, (fp, _) in current.items() if built.get(d) != fp)
    gone = sorted(set(built) - set(current))
    log.info(
        "stage=plan %d dated partitions, %d new or changed, %d gone; tables to create: %s",
        len(current),
        len(changed),
        len(gone),
        ", ".join(missing) or "none",
    )
    summary.metrics.update(
        {"partitions": len(current), "partitions changed": len(changed), "partitions gone": len(gone)}
    )
    if not changed and not gone and not missing:
        summary.notes.append("the index is up to date: nothing written")
        return _finish(summary, db)
    for name in tables:
        days = sorted(current) if name in missing else changed
        if days or gone:
            _update(db, name, days, gone, current, config, summary)
    storage.write_json(manifest_uri, {d: fp for d, (fp, _) in current.items()})
    return _finish(summary, db)


def _update(db, name: str, days: list[str], gone: list[str], current: dict, config: Config, summary) -> None:
    """Delete the rows of ``days`` and ``gone`` from table ``name`` (and, for the articles table,
    from its statistics), then add the documents of ``days``."""
    existing = set(db.list_tables().tables)
    stats = [TERM_DAYS_TABLE, DAY_SIZES_TABLE] if name == TABLE else []
    for table_name in [name, *stats]:
        if table_name in existing:
            table = db.open_table(table_name)
            for chunk in range(0, len(days + gone), 500):
                part = (days + gone)[chunk : chunk + 500]
                table.delete("published_date IN (" + ", ".join(f"date '{d}'" for d in part) + ")")
    files = [f for d in days for f in current[d][1]]
    words = None if name == TABLE else int(name.rsplit("_", 1)[1])
    table = db.open_table(name) if name in existing else None
    if files:
        table = _append(db, name, table, files, words, config, summary)
    if table is not None:
        _index(table, created=name not in existing, passages=words is not None)
    for table_name in stats:
        if table_name in db.list_tables().tables:
            _index_stats(db.open_table(table_name))


def _append(db, name: str, table, files: list[str], words: int | None, config: Config, summary: RunSummary):
    """Stream the changed partitions through Ray Data into table ``name``; returns the table."""
    import ray

    from pipelines.llm.config import LLMConfig
    from pipelines.llm.ray_env import ensure_ray

    ensure_ray(LLMConfig())
    ray.data.DataContext.get_current().enable_progress_bars = sys.stderr.isatty()
    fs, _ = storage.filesystem(files[0])
    paths = [storage.filesystem(f)[1] for f in files]
    ds = ray.data.read_parquet(paths, filesystem=fs, columns=ARTICLE_COLUMNS, partitioning=None)
    read = ds.count()
    if words is None:
        summary.rows_read = read
    embedded = ds.map_batches(
        Embedder,
        fn_constructor_args=(config.encoder, config.lead_words, words, config.batch_size),
        batch_size=config.batch_size,
        batch_format="pyarrow",
        concurrency=config.embed_actors,
        num_gpus=config.embed_gpus or None,
    )
    written = 0
    for batch in embedded.iter_batches(batch_size=config.batch_size * 4, batch_format="pyarrow"):
        if table is None:
            schema = index_schema(batch.schema.field("vector").type.list_size, passages=words is not None)
            table = db.create_table(name, schema=schema.with_metadata({"encoder": config.encoder}))
        table.add(batch.cast(table.schema))
        if words is None:
            _add_statistics(db, batch)
        written += batch.num_rows
        log.info("stage=write table=%s rows=%d", name, written)
    if words is None:
        summary.rows_written = written
        if read > written:
            summary.reject("undated", read - written)
    else:
        summary.metrics[f"{name} rows written"] = written
    return table


def _add_statistics(db, docs: pa.Table) -> None:
    """Append a batch's per-day term document frequencies and day sizes (strict statistics)."""
    term_days, day_sizes = term_statistics(docs)
    for name, rows in ((TERM_DAYS_TABLE, term_days), (DAY_SIZES_TABLE, day_sizes)):
        if name in db.list_tables().tables:
            db.open_table(name).add(rows)
        else:
            db.create_table(name, data=rows)


def _check_encoder(table, encoder: str) -> None:
    """Refuse to mix embeddings of two encoders in one table."""
    built = table.schema.metadata.get(b"encoder", b"").decode()
    if built != encoder:
        raise SystemExit(
            f"the index at this root was built with --encoder {built}; rerun with it, or delete "
            f"the index to rebuild with {encoder}"
        )


def _index(table, created: bool, passages: bool) -> None:
    """Create the indexes on a new table; fold new rows into them on an existing one."""
    rows = table.count_rows()
    if created or not table.list_indices():
        table.create_fts_index("text", replace=True)
        for column in ["published_at", "article_id"] + ["passage_id"] * passages:
            table.create_scalar_index(column, index_type="BTREE", replace=True)
    else:
        table.optimize()
    has_vector_index = any(i.index_type.startswith("IVF") for i in table.list_indices())
    if rows >= ANN_MIN_ROWS and not has_vector_index:
        table.create_index(
            metric="cosine", vector_column_name="vector", num_partitions=max(1, int(rows**0.5))
        )
    log.info("stage=write indexes up to date over %d rows", rows)


def _index_stats(table) -> None:
    """B-trees on the statistics' day and term, so a window sum reads only its rows."""
    if not table.list_indices():
        for column in ("published_date", "term") if "term" in table.schema.names else ("published_date",):
            table.create_scalar_index(column, index_type="BTREE", replace=True)
    else:
        table.optimize()


def _finish(summary: RunSummary, db) -> RunSummary:
    names = db.list_tables().tables
    summary.metrics["rows in the index"] = db.open_table(TABLE).count_rows() if TABLE in names else 0
    for name in sorted(n for n in names if n.startswith("passages_")):
        summary.metrics[f"rows in {name}"] = db.open_table(name).count_rows()
    summary.notes.append(
        "rows read = articles of the new or changed partitions; undated ones are not indexed"
    )
    summary.finish()
    print(summary.table())
    return summary
