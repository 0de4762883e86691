"""The index job's one Ray Data stream: read → documents → embed → append, for every table at once.

1. **read + documents** (tasks, a bundle of whole days of about ``READ_BYTES`` each): the day
   partitions' articles (six columns) become the documents of every table that wants their day —
   title + lead for ``articles``, passages for ``passages_<N>`` — and, for the strict statistics,
   one row a day (``statistics.day_rows``), all in one table of rows (``STREAM``, ``_table`` naming
   each row's table). An article's documents follow each other, so progress counts articles. The
   rows leave the task in blocks of at most ``--batch-size`` (a streaming repartition after the
   task), so an embedding call is bounded in what it embeds, whatever the articles' length.
2. **embed** (actor pool, ``--embed-actors``, ``--embed-gpus``): the rows of the tables that hold
   vectors (``articles``, the passage tables of ``--passage-vectors``) are embedded; the others
   pass. Left out of the stream when no table of the run wants vectors: no model is loaded. A
   model-free ``hashing-<dim>`` encoder embeds in tasks instead, with no actor.
3. **append** (tasks one at a time, in order, no CPU): each table's rows added to it, up to
   ``WRITE_ROWS`` rows an ``add``, passing on only counts, so the driver never holds articles.

One execution reads each partition once and loads the model once (a stream a table cost a model
load, a writer and a read of the corpus each). At the end the driver checks each table's rows of
its days (a batch appended twice by a retried append fails the run) and records them done
(``manifest.Record``). A run that resumes days an unfinished run began keeps their rows: each read
task looks up the ids its resumed days have in each table and leaves those documents out, so
nothing is embedded twice.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.index.manifest import STATISTICS, Partition, Record, bundles
from pipelines.index.statistics import (
    DAY_ROWS,
    STATISTICS_TABLES,
    count_days,
    day_rows,
    days_filter,
    statistics_rows,
)
from pipelines.index.tables import STORAGE_VERSION, TABLE, connect, worker_env
from udfs import storage
from udfs.embeddings import HASHING
from udfs.index_docs import ARTICLE_COLUMNS, check_partitions, documents, index_schema, passages
from udfs.report import Progress

log = logging.getLogger("augury.index")
READ_BYTES = 8 * 2**20  # Parquet bytes of the days one read task reads (about a thousand long articles)
WRITE_ROWS = 16_384  # rows a writer appends at most at once: fewer, larger fragments and commits
ENCODE_BATCH = 32  # texts the encoder runs at once inside a block
# An embedding call is bounded by --batch-size (seconds to a minute on a CPU core), so Ray Data's
# no-progress guard can only fire on a hang; set here, not left to Ray's default
NO_PROGRESS_S = 1800
WORDS_PER_BYTE = 1 / 6.5  # words of English text per byte of it, to foresee the passages of a run
# the rows of the stream: any table's document (passage_id null but for passages) or a day's
# statistics (DAY_ROWS), ``_table`` the table it goes to, ``_done`` the articles it completes
STREAM = pa.schema(
    [
        pa.field("_table", pa.string(), nullable=False),
        *(f.with_nullable(True) for f in index_schema(None, passages=True)),
        *(f for f in DAY_ROWS if f.name != "published_date"),
        pa.field("_done", pa.int64(), nullable=False),
    ]
)
DONE = STREAM.get_field_index("_done")


@dataclass(frozen=True)
class Work:
    """What one table wants from a run: its days, those of them resumed (their rows in the table
    are kept), and its passage size (None: the article documents, or the statistics)."""

    days: frozenset[str]
    resume: frozenset[str] = frozenset()
    words: int | None = None


def make_documents(
    batch: pa.Table, lead_words: int, work: dict[str, Work], root: str, filesystem: pafs.FileSystem
) -> pa.Table:
    """Ray Data task (a bundle of days' files a batch): the ``STREAM`` rows of their articles for
    every table of ``work``, an article's documents together, the days' statistics last."""
    parts = []
    for path in batch["paths"][0].as_py():
        part = pq.read_table(path, filesystem=filesystem, columns=ARTICLE_COLUMNS)
        parts.append(part.append_column("path", pa.array([path] * part.num_rows, pa.string())))
    articles = check_partitions(pa.concat_tables(parts, promote_options="permissive"))
    heads = documents(articles, lead_words)  # every article read is dated: dated partitions only
    here = {d.isoformat() for d in pc.unique(heads["published_date"]).to_pylist()}
    docs, order, stats = [], [], []
    for name, want in sorted(work.items()):
        days = pa.array([dt.date.fromisoformat(d) for d in sorted(want.days & here)], pa.date32())
        wanted = pc.is_in(heads["published_date"], value_set=days)
        if name == STATISTICS:
            stats.append(_as_stream(day_rows(heads.filter(wanted)), name))
            continue
        mine = heads.filter(wanted) if want.words is None else passages(articles.filter(wanted), want.words)
        mine = _missing(mine, root, name, sorted(want.resume & here))
        docs.append(_as_stream(mine, name))
        order.append(pa.array([len(order)] * mine.num_rows, pa.int64()))
    rows = pa.concat_tables([STREAM.empty_table(), *docs])
    # an article's documents together, in reading order (the day order of every table); a resumed
    # bundle may have none left to add
    if rows.num_rows:
        article = pc.index_in(rows["article_id"], value_set=articles["article_id"]).combine_chunks()
        keys = pa.table({"article": article, "order": pa.concat_arrays(order)})
        ranked = pc.sort_indices(keys, [("article", "ascending"), ("order", "ascending")])  # stable
        rows, article = rows.take(ranked), article.take(ranked)
        last = pc.not_equal(article, pa.concat_arrays([article[1:], pa.array([None], article.type)]))
        rows = rows.set_column(DONE, STREAM.field(DONE), pc.cast(pc.fill_null(last, True), pa.int64()))
    rows = pa.concat_tables([rows, *stats])
    if rows.num_rows:  # articles none of whose documents are new count as done here
        done = rows["_done"].to_numpy().copy()
        done[-1] += articles.num_rows - int(done.sum())
        rows = rows.set_column(DONE, STREAM.field(DONE), pa.array(done, pa.int64()))
    return rows


def _as_stream(part: pa.Table, name: str) -> pa.Table:
    """``part`` (documents or ``DAY_ROWS``) as ``STREAM`` rows of table ``name``."""
    n = part.num_rows
    columns = {f.name: part[f.name] if f.name in part.column_names else pa.nulls(n, f.type) for f in STREAM}
    columns.update(_table=pa.array([name] * n, pa.string()), _done=pa.array(np.zeros(n, np.int64)))
    return pa.table(columns, schema=STREAM)


def _missing(docs: pa.Table, root: str, name: str, resumed: list[str]) -> pa.Table:
    """``docs`` without those an unfinished run appended to table ``name`` (of days ``resumed``)."""
    if not resumed:
        return docs
    key = "article_id" if name == TABLE else "passage_id"
    index = connect(root).open_table(name)
    where = days_filter(resumed)
    there = index.search().where(where).select([key]).limit(max(1, index.count_rows(where))).to_arrow()
    return docs.filter(pc.invert(pc.is_in(docs[key], there[key].combine_chunks())))


def with_vectors(rows: pa.Table, encoder: str, tables: frozenset[str]) -> pa.Table:
    """``rows`` with a ``vector`` column: the embeddings of the rows of ``tables`` (zeros for the
    others, which are stored without one)."""
    from udfs.embeddings import embed

    dim = embed([], encoder).shape[1]  # loads a model once per process
    chosen = pc.is_in(rows["_table"], value_set=pa.array(sorted(tables), pa.string()))
    wanted = np.flatnonzero(chosen.to_numpy(zero_copy_only=False))
    vectors = np.zeros((rows.num_rows, dim), np.float32)
    if len(wanted):
        vectors[wanted] = embed(rows["text"].take(wanted).to_pylist(), encoder, ENCODE_BATCH)
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), dim)
    return rows.append_column(pa.field("vector", column.type, nullable=False), column)


class Embedder:
    """Ray Data actor of a model encoder: ``with_vectors`` with the model loaded once, at the start."""

    def __init__(self, encoder: str, tables: frozenset[str]) -> None:
        from udfs.embeddings import embed

        self.encoder, self.tables = encoder, tables
        embed([], encoder)

    def __call__(self, rows: pa.Table) -> pa.Table:
        return with_vectors(rows, self.encoder, self.tables)


def append(rows: pa.Table, root: str, encoder: str, vectors: frozenset[str]) -> pa.Table:
    """Ray Data task (one at a time, in stream order): appends each table's rows to it (the
    statistics' to ``term_days`` and ``day_sizes``), creating it on its first rows; passes on the
    rows written per table and the articles done. A task, not an actor: Ray reuses its worker,
    where a writer actor was a process started (and its imports paid) for every run."""
    db = connect(root)
    there = set(db.list_tables().tables)
    written: dict[str, int] = {}
    for name in sorted(set(rows["_table"].to_pylist())):
        part = rows.filter(pc.equal(rows["_table"], name))
        out = statistics_rows(part) if name == STATISTICS else {name: part}
        for table, add in out.items():
            if table in there:
                opened = db.open_table(table)
            else:
                schema = _schema(table, add, encoder, vectors)
                opened = db.create_table(table, schema=schema, data_storage_version=STORAGE_VERSION)
            opened.add(add.select(opened.schema.names).cast(opened.schema))
            written[table] = add.num_rows
    return pa.table(
        {
            "table": list(written),
            "rows": list(written.values()),
            "done": [int(pc.sum(rows["_done"]).as_py() or 0)] + [0] * (len(written) - 1),
        },
        schema=pa.schema([("table", pa.string()), ("rows", pa.int64()), ("done", pa.int64())]),
    )


def _schema(name: str, rows: pa.Table, encoder: str, vectors: frozenset[str]) -> pa.Schema:
    if name in STATISTICS_TABLES:
        return rows.schema
    dim = rows.schema.field("vector").type.list_size if name in vectors else None
    return index_schema(dim, passages=name != TABLE).with_metadata({"encoder": encoder})


def stream(
    record: Record,
    root: str,
    work: dict[str, Work],
    days: dict[str, Partition],
    vectors: frozenset[str],
    config,
) -> dict[str, int]:
    """Stream the partitions of ``days`` into the tables of ``work`` (each its own days of them);
    check and record each table's days. Returns the articles read (``read``), and per table the
    rows written and (``<table> embedded``) the documents embedded."""
    import ray

    db = connect(root)
    kept = {
        name: count_days(db.open_table(name), sorted(want.resume))
        for name, want in work.items()
        if want.resume
    }
    files = [f for d in sorted(days) for f in days[d].files]
    total, text_bytes = _footers(files)
    context = ray.data.DataContext.get_current()
    # rows go in in day order, so the rows before a cutoff are mostly a prefix of the table: the
    # B-tree prefilter of a search builds its row set faster
    context.execution_options.preserve_order = True
    context.raise_original_map_exception = True  # a misfiled article's InputError, not a wrapper
    context.execution_no_progress_timeout_s = NO_PROGRESS_S
    # the driver's filesystem object goes to the tasks: on S3 it carries the endpoint and every
    # credential (a session token too)
    fs, _ = storage.filesystem(files[0])
    items = [{"paths": [storage.filesystem(f)[1] for f in bundle]} for bundle in bundles(days, READ_BYTES)]
    rows = (
        ray.data.from_items(items, override_num_blocks=len(items))
        .map_batches(
            make_documents,
            fn_kwargs={"lead_words": config.lead_words, "work": work, "root": root, "filesystem": fs},
            batch_size=1,
            batch_format="pyarrow",
            runtime_env=worker_env(),
        )
        .repartition(target_num_rows_per_block=config.batch_size)
    )
    if vectors & set(work) and HASHING.fullmatch(config.encoder):
        # no model to load: plain tasks, on worker processes Ray keeps (an actor pool started a
        # process or two a run, each paying its imports, for a few milliseconds of hashing)
        rows = rows.map_batches(
            with_vectors,
            fn_args=(config.encoder, vectors),
            batch_size=config.batch_size,
            batch_format="pyarrow",
        )
    elif vectors & set(work):
        rows = rows.map_batches(
            Embedder,
            fn_constructor_args=(config.encoder, vectors),
            batch_size=config.batch_size,
            batch_format="pyarrow",
            compute=_pool(config.embed_actors),
            num_gpus=config.embed_gpus or None,
        )
    # a twentieth of the run's rows at most, so progress comes every tenth
    foreseen = total * (1 + sum(1 for w in work.values() if w.words)) + text_bytes * WORDS_PER_BYTE * sum(
        1 / w.words for w in work.values() if w.words
    )
    counts = rows.map_batches(
        append,
        fn_kwargs={"root": root, "encoder": config.encoder, "vectors": vectors},
        batch_size=min(WRITE_ROWS, max(config.batch_size, int(foreseen) // 20)),
        batch_format="pyarrow",
        compute=ray.data.TaskPoolStrategy(size=1),  # one append at a time, in the stream's order
        # a writer mostly waits on storage; holding a CPU, it left a 2-CPU cluster none for the
        # read tasks, and the job waited forever
        num_cpus=0,
        runtime_env=worker_env(),
    )
    written = dict.fromkeys(
        [*(n for n in work if n != STATISTICS), *STATISTICS_TABLES * (STATISTICS in work)], 0
    )
    bar = Progress(f"stage=embed tables={','.join(sorted(work))}", total, log, "articles")
    try:
        for batch in counts.iter_batches(batch_size=None, batch_format="pyarrow"):
            for name, n in zip(batch["table"].to_pylist(), batch["rows"].to_pylist(), strict=True):
                written[name] += n
            bar.update(sum(batch["done"].to_pylist()))
    finally:
        bar.close()
    _check(record, root, work, days, {n: kept.get(n, 0) + w for n, w in written.items()})
    embedded = {f"{n} embedded": written[n] for n in work if n in vectors}
    return {"read": total, **{n: kept.get(n, 0) + w for n, w in written.items()}, **embedded}


def _check(
    record: Record, root: str, work: dict[str, Work], days: dict[str, Partition], expected: dict
) -> None:
    """Record each table's days done once its rows of them are those kept and written. Ray
    retries an append whose worker died, and its batch may already be in the table: then the
    table's days are left to be redone whole (not resumed) by the next run."""
    db = connect(root)
    wrong = []
    for name, want in sorted(work.items()):
        tables = STATISTICS_TABLES if name == STATISTICS else (name,)
        found = {t: count_days(db.open_table(t), sorted(want.days)) if expected[t] else 0 for t in tables}
        if any(found[t] != expected[t] for t in tables):
            wrong += [f"{found[t]} rows appended to {t} for {expected[t]} written" for t in tables]
            record.abandon(name)
        else:
            record.finish(name, {d: days[d].fingerprint for d in want.days})
    if wrong:
        raise SystemExit(
            f"stage=write: {'; '.join(wrong)} (a retried batch was appended twice); those days are "
            "not recorded: rerun the job to redo them"
        )


def _footers(files: list[str]) -> tuple[int, int]:
    """Rows and bytes of text (uncompressed) of the Parquet files, from their footers (read 16 at
    a time: on S3 each is a request)."""

    def sizes(uri: str) -> tuple[int, int]:
        fs, path = storage.filesystem(uri)
        with fs.open_input_file(path) as f:
            meta = pq.read_metadata(f)
        text = meta.schema.names.index("text")
        groups = (meta.row_group(i) for i in range(meta.num_row_groups))
        return meta.num_rows, sum(g.column(text).total_uncompressed_size for g in groups)

    with ThreadPoolExecutor(16) as pool:
        found = list(pool.map(sizes, files))
    return sum(r for r, _ in found), sum(b for _, b in found)


def _pool(actors: int):
    """The embedding actors: ``actors`` of them, or (0) from one up to one a CPU of the cluster
    but one, left for the read tasks (and no more than this machine's cores when Ray runs here:
    a local Ray counts more logical CPUs than there are cores)."""
    import ray

    if actors:
        return ray.data.ActorPoolStrategy(size=actors)
    most = max(1, int(ray.cluster_resources().get("CPU", 1)) - 1)
    if not os.environ.get("RAY_ADDRESS"):
        most = min(most, os.cpu_count() or 1)
    return ray.data.ActorPoolStrategy(min_size=1, max_size=most)
