"""Strict BM25's per-day statistics, written by the index job one whole day at a time.

``term_days`` holds one row per day and term (the day's document frequency) and ``day_sizes`` one
row per day. They used to be written per embedding batch, so a day spread over B batches had B rows
per term: on CC-NEWS (~50k articles a day, 256 per batch) about 200 rows where one will do, in the
table and in every strict search's reads. Here each changed day's partition files are read and
counted by a Ray Data task of their own, and one writer actor appends the rows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.index.engine import connect
from udfs import storage
from udfs.index_docs import ARTICLE_COLUMNS, DAY_SIZES, TERM_DAYS, documents, term_statistics

# a day's statistics as one flat row set for the trip to the writer: the term rows, then the
# day's size row (term null)
DAY_ROWS = pa.schema(
    [
        pa.field("published_date", pa.date32(), nullable=False),
        pa.field("term", pa.string()),
        pa.field("df", pa.int64()),
        pa.field("docs", pa.int64()),
        pa.field("tokens", pa.int64()),
    ]
)


def day_rows(batch: pa.Table, lead_words: int, filesystem: pafs.FileSystem) -> pa.Table:
    """Ray Data task (one day a batch): read the day's partition files, count its documents."""
    tables = [
        pq.read_table(path, filesystem=filesystem, columns=ARTICLE_COLUMNS)
        for path in batch["paths"][0].as_py()
    ]
    articles = pa.concat_tables(tables, promote_options="permissive")
    term_days, day_sizes = term_statistics(documents(articles, lead_words))
    # each part's missing columns come back null
    return (
        pa.concat_tables([term_days, day_sizes], promote_options="default")
        .select(DAY_ROWS.names)
        .cast(DAY_ROWS)
    )


class StatisticsWriter:
    """Ray Data actor (one a run): appends the rows of whole days to ``term_days`` and
    ``day_sizes``, creating them on the first batch; passes on row counts only."""

    def __init__(self, root: str, storage_version: str) -> None:
        self.root, self.storage_version = root, storage_version
        self.tables: dict = {}  # name → open table, so a run lists the tables once, not once a day

    def __call__(self, batch: pa.Table) -> pa.Table:
        sizes = pc.is_null(batch["term"])
        parts = {
            "term_days": batch.filter(pc.invert(sizes)).select(TERM_DAYS.names).cast(TERM_DAYS),
            "day_sizes": batch.filter(sizes).select(DAY_SIZES.names).cast(DAY_SIZES),
        }
        for name, rows in parts.items():
            if name in self.tables:
                self.tables[name].add(rows)
            else:
                self.tables[name] = self._open(name, rows)
        return pa.table(
            {"term_days": [parts["term_days"].num_rows], "day_sizes": [parts["day_sizes"].num_rows]}
        )

    def _open(self, name: str, rows: pa.Table):
        """Table ``name`` with ``rows`` added: opened, or created with them."""
        db = connect(self.root)
        if name not in db.list_tables().tables:
            return db.create_table(name, data=rows, data_storage_version=self.storage_version)
        table = db.open_table(name)
        table.add(rows)
        return table


def append_statistics(
    root: str, days: dict[str, list[str]], lead_words: int, storage_version: str, runtime_env: dict
) -> dict[str, int]:
    """Count the days of ``days`` (day → its partition's file URIs) into the statistics tables;
    the rows written per table. Their rows of these days must have been deleted before."""
    import ray

    # the driver's filesystem object goes to the tasks: on S3 it carries the endpoint and every
    # credential (a session token too), as the embedding stage's read tasks get it
    filesystem, _ = storage.filesystem(next(iter(days.values()))[0])
    items = [{"paths": [storage.filesystem(f)[1] for f in files]} for _, files in sorted(days.items())]
    counted = ray.data.from_items(items).map_batches(
        day_rows,
        fn_kwargs={"lead_words": lead_words, "filesystem": filesystem},
        batch_size=1,
        batch_format="pyarrow",
        runtime_env=runtime_env,
    )
    counts = counted.map_batches(
        StatisticsWriter,
        fn_constructor_args=(root, storage_version),
        batch_size=None,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0,  # waits on storage; a CPU held here starved the counting tasks of a 2-CPU cluster
        runtime_env=runtime_env,
    )
    written = {"term_days": 0, "day_sizes": 0}
    for batch in counts.iter_batches(batch_size=None, batch_format="pyarrow"):
        for name in written:
            written[name] += sum(batch[name].to_pylist())
    return written
