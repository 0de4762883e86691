"""The embedding stream of one index table: read → documents → embed → append, in Ray Data.

1. **read + documents** (tasks, a bundle of whole days of about ``READ_BYTES`` each): the day
   partitions' articles (six columns) become the table's documents — title + lead, or
   passages — and leave the task in blocks of at most
   ``--batch-size`` documents (a streaming repartition fused into the task), so an embedding call
   is bounded in what it embeds, whatever the articles' length: a few hundred long articles make
   thousands of passages.
2. **embed** (actor pool, ``--embed-actors``, ``--embed-gpus``): one block a call.
3. **append** (one actor, no CPU): ``WRITE_ROWS`` documents an ``add``, passing on only counts per
   day, so the driver never holds articles.

At the end the driver checks the days' row counts in the table (a batch appended twice by a
retried writer fails the run) and records them done (``manifest.Record``). A run that resumes
days an unfinished run began keeps their rows: each read task looks up the ids its resumed days
have in the table and leaves those documents out, so nothing is embedded twice.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.index.manifest import Partition, Record, bundles
from pipelines.index.statistics import count_days, days_filter
from pipelines.index.tables import STORAGE_VERSION, TABLE, connect, worker_env
from udfs import storage
from udfs.index_docs import ARTICLE_COLUMNS, check_partitions, documents, index_schema, passages
from udfs.report import Progress

log = logging.getLogger("augury.index")
READ_BYTES = 8 * 2**20  # Parquet bytes of the days one read task reads (about a thousand long articles)
WRITE_ROWS = 16_384  # documents a writer appends at most at once: fewer, larger fragments and commits
ENCODE_BATCH = 32  # texts the encoder runs at once inside a block
# An embedding call is bounded by --batch-size (seconds to a minute on a CPU core), so Ray Data's
# no-progress guard can only fire on a hang; set here, not left to Ray's default
NO_PROGRESS_S = 1800
LAST = "_last"  # 1 on an article's last document: progress counts articles


def make_documents(
    batch: pa.Table,
    lead_words: int,
    words: int | None,
    resume: frozenset[str],
    table: tuple[str, str],
    filesystem: pafs.FileSystem,
) -> pa.Table:
    """Ray Data task (a bundle of days' files a batch): the documents of their articles, with
    ``LAST``; of the days of ``resume``, only those not in the index table ``table`` (root, name)
    yet."""
    parts = []
    for path in batch["paths"][0].as_py():
        part = pq.read_table(path, filesystem=filesystem, columns=ARTICLE_COLUMNS)
        parts.append(part.append_column("path", pa.array([path] * part.num_rows, pa.string())))
    articles = check_partitions(pa.concat_tables(parts, promote_options="permissive"))
    docs = documents(articles, lead_words) if words is None else passages(articles, words)
    ids = docs["article_id"].combine_chunks()
    last = pc.not_equal(ids, pa.concat_arrays([ids[1:], pa.array([None], pa.string())]))
    docs = docs.append_column(LAST, pc.cast(pc.fill_null(last, True), pa.int64()))
    days = sorted({d.isoformat() for d in docs["published_date"].to_pylist()} & resume)
    if days:  # an unfinished run's documents of these days are there already
        key = "article_id" if words is None else "passage_id"
        index = connect(table[0]).open_table(table[1])
        where = days_filter(days)
        there = index.search().where(where).select([key]).limit(max(1, index.count_rows(where))).to_arrow()
        docs = docs.filter(pc.invert(pc.is_in(docs[key], there[key].combine_chunks())))
    return docs


class Embedder:
    """Ray Data actor: the embeddings of a block of documents."""

    def __init__(self, encoder: str) -> None:
        from udfs.embeddings import HASHING, load_encoder

        if not HASHING.fullmatch(encoder):
            load_encoder(encoder)
        self.encoder = encoder

    def __call__(self, docs: pa.Table) -> pa.Table:
        from udfs.embeddings import embed

        vectors = embed(docs["text"].to_pylist(), self.encoder, ENCODE_BATCH)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), vectors.shape[1])
        return docs.append_column(pa.field("vector", column.type, nullable=False), column)


class Writer:
    """Ray Data actor (one per table and run): appends the embedded documents to table ``name``,
    creating it on the first batch; passes on documents and articles written per day."""

    def __init__(self, root: str, name: str, encoder: str) -> None:
        self.root, self.name, self.encoder, self.table = root, name, encoder, None

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self.table is None:
            db = connect(self.root)
            if self.name in db.list_tables().tables:
                self.table = db.open_table(self.name)
            else:
                dim = batch.schema.field("vector").type.list_size
                schema = index_schema(dim, passages=self.name != TABLE)
                self.table = db.create_table(
                    self.name,
                    schema=schema.with_metadata({"encoder": self.encoder}),
                    data_storage_version=STORAGE_VERSION,
                )
        self.table.add(batch.drop_columns([LAST]).cast(self.table.schema))
        counts = pa.table({"published_date": batch["published_date"], LAST: batch[LAST]})
        return counts.group_by("published_date").aggregate([([], "count_all"), (LAST, "sum")])


def append(
    record: Record,
    root: str,
    name: str,
    words: int | None,
    days: dict[str, Partition],
    resume: list[str],
    config,
) -> tuple[int, int, int]:
    """Stream the partitions of ``days`` into table ``name``; the days of ``resume`` keep the rows
    an unfinished run appended. Returns (articles read, rows of these days in the table,
    documents embedded)."""
    import ray

    db = connect(root)
    resume = resume if name in db.list_tables().tables else []
    kept = count_days(db.open_table(name), resume) if resume else 0
    files = [f for d in sorted(days) for f in days[d].files]
    total = _articles(files)
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
    docs = (
        ray.data.from_items(items, override_num_blocks=len(items))
        .map_batches(
            make_documents,
            fn_kwargs={
                "lead_words": config.lead_words,
                "words": words,
                "resume": frozenset(resume),
                "table": (root, name),
                "filesystem": fs,
            },
            batch_size=1,
            batch_format="pyarrow",
        )
        .repartition(target_num_rows_per_block=config.batch_size)
    )
    embedded = docs.map_batches(
        Embedder,
        fn_constructor_args=(config.encoder,),
        batch_size=config.batch_size,
        batch_format="pyarrow",
        compute=_pool(config.embed_actors),
        num_gpus=config.embed_gpus or None,
    )
    counts = embedded.map_batches(
        Writer,
        fn_constructor_args=(root, name, config.encoder),
        # a twentieth of the articles' worth of documents at most, so progress comes every tenth
        batch_size=min(WRITE_ROWS, max(config.batch_size, total // 20)),
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
        # the one writer mostly waits on storage; holding a CPU, it left a 2-CPU cluster none for
        # the read tasks, and the job waited forever
        num_cpus=0,
        runtime_env=worker_env(),
    )
    written = 0
    bar = Progress(f"stage=embed table={name}", total, log, "articles")
    try:
        for batch in counts.iter_batches(batch_size=None, batch_format="pyarrow"):
            written += sum(batch["count_all"].to_pylist())
            bar.update(sum(batch[f"{LAST}_sum"].to_pylist()))
    finally:
        bar.close()
    _check(record, root, name, days, kept + written)
    return total, kept + written, written


def _check(record: Record, root: str, name: str, days: dict[str, Partition], expected: int) -> None:
    """Record the days of ``days`` done once their rows in table ``name`` are those kept and
    written. Ray Data restarts a failed writer and retries its batch, which may already be in the
    table: then the days are left to be redone whole (not resumed) by the next run."""
    found = count_days(connect(root).open_table(name), sorted(days))
    if found != expected:
        record.abandon(name)
        raise SystemExit(
            f"stage=write table={name}: {found} rows appended for {expected} written (a retried batch "
            "was appended twice); its days are not recorded: rerun the job to redo them"
        )
    record.finish(name, {d: part.fingerprint for d, part in days.items()})


def _articles(files: list[str]) -> int:
    """Rows of the Parquet files, from their footers (read 16 at a time: on S3 each is a request)."""

    def rows(uri: str) -> int:
        fs, path = storage.filesystem(uri)
        with fs.open_input_file(path) as f:
            return pq.read_metadata(f).num_rows

    with ThreadPoolExecutor(16) as pool:
        return sum(pool.map(rows, files))


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
