"""What the index was built from, table by table, so that a rerun — after a corpus update, a failure
or a kill — reads only what is missing.

* ``partitions``: the dated ``published_date`` partitions of the corpus, each with a fingerprint of
  its file names and sizes.
* ``_partitions.json`` (``Record.done``): per table (and ``statistics`` for the strict statistics
  tables), the fingerprint of each day whose rows are all in it, recorded once a table's rows
  are written and checked.
* ``_run.json`` (``Record.started``): per table, the days a run began to append and has not
  finished (their rows may be in part in the table), and the tables whose indexes a run has not
  brought up to date yet. A rerun keeps those rows when the day's files are the same and embeds
  only the documents that are not there; it deletes the rows of a day whose files changed.
  Begun days are recorded before their first row is appended, so a kill at any time leaves
  nothing in a table that the record does not account for.

An index written before the per-table record (``_partitions.json`` a flat day → fingerprint map)
counts as done for that map in every table it has.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from udfs import storage
from udfs.schemas import HIVE_NULL

MANIFEST = "_partitions.json"
RUN = "_run.json"
STATISTICS = "statistics"  # the record of the strict statistics tables


@dataclass(frozen=True)
class Partition:
    """One dated partition of the corpus: a fingerprint of its files, their URIs and bytes."""

    fingerprint: str
    files: list[str]
    size: int


def partitions(articles_uri: str) -> dict[str, Partition]:
    """The dated partitions of the articles table by day (undated articles are never indexed)."""
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
        uris = [storage.join(articles_uri, n.strip("/")) for n, _ in names]
        out[day] = Partition(digest, uris, sum(size for _, size in names))
    return out


def bundles(days: dict[str, Partition], size: int) -> list[list[str]]:
    """The days' file URIs, in day order, cut into bundles of whole days of about ``size`` bytes
    of Parquet: one Ray Data task each. A task per file cost seconds a file on a busy machine
    (1,000 small days: minutes before the first article was embedded)."""
    out: list[list[str]] = []
    filled = size
    for _, part in sorted(days.items()):
        if filled + part.size > size and (not out or out[-1]):
            out.append([])
            filled = 0
        out[-1] += part.files
        filled += part.size
    return out


@dataclass
class Record:
    """The two files of an index's directory ``uri`` (see the module's docstring)."""

    uri: str
    done: dict[str, dict[str, str]] = field(default_factory=dict)  # table → day → fingerprint
    started: dict[str, dict[str, str]] = field(default_factory=dict)
    unindexed: set[str] = field(default_factory=set)  # tables whose indexes are behind their rows

    @classmethod
    def load(cls, uri: str, tables: list[str]) -> Record:
        """The record of the index at ``uri``, whose existing tables are ``tables``."""
        record = cls(uri)
        manifest = storage.join(uri, MANIFEST)
        done = storage.read_json(manifest) if tables and storage.exists(manifest) else {}
        if done and all(isinstance(v, str) for v in done.values()):  # the flat map of old
            done = {t: dict(done) for t in [*tables, STATISTICS]}
        record.done = {t: dict(days) for t, days in done.items()}
        run = storage.join(uri, RUN)
        if storage.exists(run):
            state = storage.read_json(run)
            record.started = {t: dict(days) for t, days in state["started"].items()}
            record.unindexed = set(state["unindexed"])
        return record

    def days(self, table: str, current: dict[str, Partition], exists: bool) -> tuple[list, list, list]:
        """Of ``table``: the days to append afresh (their old rows, if any, deleted first), the
        days to resume (rows from an unfinished run with the same files kept), the days gone."""
        done = self.done.get(table, {}) if exists else {}
        started = self.started.get(table, {}) if exists else {}
        fresh, resume = [], []
        for day, part in sorted(current.items()):
            if done.get(day) == part.fingerprint:
                continue
            (resume if started.get(day) == part.fingerprint else fresh).append(day)
        gone = sorted((set(done) | set(started)) - set(current))
        return fresh, resume, gone

    def start(self, table: str, days: dict[str, str], gone: list[str]) -> None:
        """A run is about to append ``days`` (day → fingerprint) to ``table``; ``gone`` are deleted."""
        for day in gone:
            self.done.get(table, {}).pop(day, None)
        self.started[table] = days
        self.unindexed.add(table)
        self._save_run()
        if gone:
            self._save_done()

    def finish(self, table: str, days: dict[str, str]) -> None:
        """The rows of ``days`` are all in ``table`` (checked)."""
        self.done.setdefault(table, {}).update(days)
        for day in days:
            self.started.get(table, {}).pop(day, None)
        self._save_done()
        self._save_run()

    def forget(self, table: str) -> None:
        """``table`` is gone (dropped to be built again): none of its days is done or begun."""
        self.done.pop(table, None)
        self.started.pop(table, None)
        self._save_done()
        self._save_run()

    def abandon(self, table: str) -> None:
        """``table``'s unfinished days are not to be resumed: their rows are suspect."""
        self.started[table] = {}
        self._save_run()

    def indexed(self, table: str) -> None:
        """``table``'s indexes are up to date with its rows."""
        self.unindexed.discard(table)
        if self.started.get(table) == {}:
            del self.started[table]
        self._save_run()

    def _save_done(self) -> None:
        storage.write_json(storage.join(self.uri, MANIFEST), {t: d for t, d in sorted(self.done.items())})

    def _save_run(self) -> None:
        uri = storage.join(self.uri, RUN)
        if any(self.started.values()) or self.unindexed:
            storage.write_json(uri, {"started": self.started, "unindexed": sorted(self.unindexed)})
        elif storage.exists(uri):
            storage.delete(uri)
