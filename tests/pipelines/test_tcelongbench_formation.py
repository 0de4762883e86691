"""TCE formation window by window on the real reported.ly articles and their article index: a
day's partition is read once, every article is decided once, and windows shorter than the corpus
give TCEs inside the span bounds, none sharing an article."""

from __future__ import annotations

import shutil
from collections import Counter

import pyarrow as pa
import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StageRunner
from pipelines.tcelongbench import Config, formation
from pipelines.tcelongbench.formation import form_tces
from tests.pipelines.test_tcelongbench_pipeline import DEMO
from udfs import storage
from udfs.cli import InputError
from udfs.schemas import ARTICLES, TableSpec
from udfs.tcelongbench import tce

pytestmark = [pytest.mark.ray]


@pytest.fixture(scope="module")
def indexed(reportedly_root, copy_root) -> tuple[str, int]:
    root = copy_root(reportedly_root)
    return root, storage.count_rows(ARTICLES.uri(root))


def _form(config: Config):
    ledger = Ledger(StageRunner(config.root, "tcelongbench", LLMConfig(backend="scripted", script={})))
    events = form_tces(config, ledger)
    (step,) = ledger.summaries
    return events, step, ledger.rejected_table().to_pylist()


def test_short_windows_decide_every_article_once_inside_the_span_bounds(indexed):
    root, n_articles = indexed
    config = Config(root=root, **{**DEMO, "min_span_days": 1, "max_span_days": 4, "window_days": 9})
    events, step, rejected = _form(config)

    assert step.metrics["windows"] >= 3 and step.reconciles and step.rows_read == n_articles
    assert len(events.rows) + len(rejected) == n_articles  # nothing undated or off-topic here
    assert Counter(r["article_id"] for r in events.rows).most_common(1)[0][1] == 1
    assert Counter(r["item_id"] for r in rejected).most_common(1)[0][1] == 1
    assert not {r["article_id"] for r in events.rows} & {r["item_id"] for r in rejected}
    assert events.tces and all(1 <= t["span_days"] <= 4 and t["n"] >= 2 for t in events.tces)


def test_a_window_task_reads_each_of_its_new_days_alone_and_clusters_the_overlap_with_them(
    indexed, monkeypatch
):
    """The window's task (called here in the process, so the recorder sees its reads) reads the
    days it is given, each once and that day only, and its candidates are the carried overlap
    plus the new days' kept articles, in id order, one label each."""
    root, _ = indexed
    reads, read_partition = [], TableSpec.read_partition

    def recording(spec, root, value, columns=None, filter=None):
        table = read_partition(spec, root, value, columns, filter)
        reads.append((value, set(table.column("published_at").cast("date32").to_pylist())))
        return table

    monkeypatch.setattr(TableSpec, "read_partition", recording)
    config = Config(root=root, **DEMO)
    days = sorted(storage.partition_values(ARTICLES.dataset(root), "published_date"))
    (window,) = tce.windows(days, 400, 31)
    cleaner = tce.Precleaner(tce.TopicFilter(), config.min_chars, config.languages)
    first = formation._window_work(config, window, days[:5], cleaner, formation.CANDIDATES.empty_table())
    carried = first.candidates.slice(0, 3)
    second = formation._window_work(config, window, days[5:8], first.cleaner, carried)

    assert [day for day, _ in reads] == days[:8] and all(seen == {day} for day, seen in reads)
    assert len(first.candidates) and len(first.labels) == len(first.candidates)
    ids = second.candidates["article_id"].to_pylist()
    assert ids == sorted(ids) and set(carried["article_id"].to_pylist()) <= set(ids)
    assert {d for d in second.candidates["date"].to_pylist()} - {
        d for d in carried["date"].to_pylist()
    } <= set(days[5:8])
    assert len(second.labels) == len(ids)


def test_one_window_over_the_whole_month_is_the_default(indexed):
    root, _ = indexed
    events, step, _ = _form(Config(root=root, **DEMO))
    wide, _, _ = _form(Config(root=root, **DEMO, window_days=400))
    assert step.metrics["windows"] == 1
    assert [t["tce_id"] for t in events.tces] == [t["tce_id"] for t in wide.tces]


def test_a_missing_or_stale_index_is_an_error(indexed, tmp_path):
    root, _ = indexed
    day = storage.join(ARTICLES.uri(root), "published_date=2015-09-10")
    one_day = storage.read_table(day, ARTICLES.file_schema)
    bare = str(tmp_path / "bare")
    storage.write_table(
        one_day, storage.join(ARTICLES.uri(bare), "published_date=2015-09-10", "part-0.parquet")
    )
    with pytest.raises(InputError, match="no article index"):
        _form(Config(root=bare, **DEMO))

    stale = str(tmp_path / "stale")
    shutil.copytree(root, stale)
    late = one_day.slice(0, 1)
    for column, value in (
        ("article_id", "not-indexed"),
        ("canonical_url", "https://x.org/1"),
        ("title", "New"),
    ):
        late = late.set_column(late.schema.get_field_index(column), column, pa.array([value]))
    storage.write_table(late, storage.join(ARTICLES.uri(stale), "published_date=2015-09-10", "late.parquet"))
    with pytest.raises(InputError, match=r"out of date: 1 articles .* not-indexed"):
        _form(Config(root=stale, **DEMO))


def test_windows_are_read_and_clustered_in_ray_workers_not_in_the_driver(indexed, monkeypatch):
    """A day's text, a window's vectors and the clustering's working memory grow with the articles
    a day holds; they belong to a worker. A driver that read a day before the TCEs' own articles,
    or clustered, would hit the patched functions."""
    root, _ = indexed

    def in_the_driver(*args, **kwargs):
        raise AssertionError("the driver read a day or clustered a window")

    read_partition, final_reads = TableSpec.read_partition, formation._tce_articles

    def tce_articles(*args):
        monkeypatch.setattr(TableSpec, "read_partition", read_partition)
        return final_reads(*args)

    monkeypatch.setattr(tce, "cluster_labels", in_the_driver)
    monkeypatch.setattr(TableSpec, "read_partition", in_the_driver)
    monkeypatch.setattr(formation, "_tce_articles", tce_articles)
    events, step, _ = _form(Config(root=root, **DEMO))
    assert events.tces and step.reconciles and events.articles


def test_undated_articles_are_counted_without_reading_them(indexed, tmp_path):
    root, n_articles = indexed
    undated_root = str(shutil.copytree(root, tmp_path / "undated"))
    one_day = storage.read_table(
        storage.join(ARTICLES.uri(root), "published_date=2015-09-10"), ARTICLES.file_schema
    )
    undated = pa.concat_tables([one_day.slice(0, 1)] * 2)
    for column, values in (
        ("article_id", ["undated-1", "undated-2"]),
        ("published_at", pa.array([None, None], one_day.schema.field("published_at").type)),
    ):
        undated = undated.set_column(undated.schema.get_field_index(column), column, pa.array(values))
    storage.write_table(
        undated,
        storage.join(ARTICLES.uri(undated_root), "published_date=__HIVE_DEFAULT_PARTITION__", "u.parquet"),
    )
    events, step, rejected = _form(Config(root=undated_root, **DEMO))
    assert step.rejected["no_date"] == 2 and step.rows_read == n_articles + 2 and step.reconciles
    assert not {r["item_id"] for r in rejected} & {"undated-1", "undated-2"} and events.tces
