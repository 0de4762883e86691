"""The builders: each declared once, listed in one registry, run by one driver.

A builder declares (``Builder``) everything the rest of the kit needs to know about it: its name
and Config, its steps, its output tables, what one event of it is (the audit's split check), how
the evaluation retrieves for it, its demo flags and its scale-bench limits. ``MODULES`` lists the
builders, one line each; the audit, the evaluation, ``bench.scale`` and ``demo.sh`` (through
``python -m pipelines.builders``) read them from here and nowhere else.

Every builder step has one shape, ``step(b: Build, s: State) -> None`` (datatrove's ``run`` with
its ``stat_update``): it reads what earlier steps left in the builder's ``State``, runs its LLM
stages with ``b.ledger.run`` (one batched pass over every pending row, failed rows recorded,
failed answers retried with ``retries=n``), counts its own decisions with ``b.ledger.step`` /
``keep`` / ``drop`` / ``close``, and leaves its results in the state. A step that finds nothing
to do calls ``b.stop(why)``: the steps after it do not run.

The driver (``build``) runs them all the same way:

1. preamble: the declared inputs are checked before any work (``Ledger.inputs``);
2. the steps, in order;
3. ``--plan``: print what the stages would send and stop; nothing is written;
4. ``finish``: the builder's last steps and its outputs (``Outputs``): this run's tables and the
   benchmark's evaluation items;
5. the quality gate (``pipelines.quality``): every item of the run is checked; a degenerate or
   repeated one becomes a rejected row and leaves the items and the question tables;
6. check-before-write: every step's counts must reconcile (``Ledger.check``), or nothing is written;
7. writes: the tables, the rejected rows (``benchmarks/<name>/rejected``), the builder's
   ``commit``, the evaluation items and the dataset card; then the summary table and a ``Result``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import runpy
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pyarrow as pa

from pipelines.benchmarks import write_benchmark_table, write_card, write_eval_items
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StagePlan, StageRunner
from pipelines.quality import Quality, gate
from udfs import storage
from udfs.audit import EventKey
from udfs.card_quality import quality_section
from udfs.layout import Layout
from udfs.report import RunSummary
from udfs.schemas import TableSpec

if TYPE_CHECKING:
    from pipelines.evaluate.context import RetrievalConfig

# The registry: one line per builder (a module whose ``BUILDER`` is its declaration), in the
# order the demo runs them.
MODULES = (
    "pipelines.tcelongbench",
    "pipelines.openforecast",
    "pipelines.prophet",
    "pipelines.daily_oracle",
)

C = TypeVar("C")
S = TypeVar("S")


@dataclass
class Build(Generic[C]):
    """One run of a builder, as its steps see it: the Config, the stage runner and the ledger."""

    config: C
    runner: StageRunner
    ledger: Ledger
    stopped: str | None = None  # why the run has nothing (more) to do; set by ``stop``

    def stop(self, why: str) -> None:
        """End the run's steps here: the steps after this one do not run (``finish`` does)."""
        self.stopped = why


Step = Callable[[Build[Any], Any], None]


@dataclass
class Outputs:
    """What a run writes, handed to the driver by the builder's ``finish``.

    ``tables``: this run's tables by name (``rejected`` among them is returned, never written
    from here: the driver writes the ledger's rejected rows). ``items``: every evaluation item
    of the benchmark (None: ``eval_items`` stays as it is). ``counts(tables, rejected)``: the
    dataset card's counts, given the written tables (``eval_items`` included) and the rejected
    rows written (None: no card). ``partitions``: the values of the tables' partition column this
    run replaces (None: every table is replaced whole). ``commit``: what follows the tables
    (Daily Oracle marks its days done). ``sources``: by item id, the text an item's question was
    written from (the quality gate rejects a question about something else).
    """

    tables: dict[str, pa.Table]
    items: list[dict[str, Any]] | None = None
    counts: Callable[[dict[str, pa.Table], int], dict[str, Any]] | None = None
    partitions: Sequence[Any] | None = None
    commit: Callable[[], None] | None = None
    sources: Mapping[str, str] | None = None


@dataclass
class Result:
    """What a run did: its written tables (``eval_items`` and, when held, ``rejected``
    included), every step's summary, the dataset card, the stage plans (``--plan``), the LLM
    requests it computed, and the builder's own details (Daily Oracle: the days built, skipped
    and left unmarked; PROPHET: the plan per question)."""

    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    card: dict[str, Any] | None
    plans: list[StagePlan] = field(default_factory=list)
    requests_computed: int = 0
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Inputs:
    """The corpus tables a builder reads: all of ``tables`` (or ``any_of`` them), ``optional``
    ones that may be absent; ``index``: it searches the article index (``python -m
    pipelines.index``)."""

    tables: tuple[TableSpec, ...]
    any_of: bool = False
    optional: tuple[TableSpec, ...] = ()
    index: bool = False


@dataclass(frozen=True)
class Demo:
    """How ``demo.sh`` runs a builder: a title and the flags after ``--root``; ``{shared}`` in a
    flag stands for the sample data directory."""

    title: str
    args: tuple[str, ...]

    def argv(self, shared: str) -> list[str]:
        return [a.replace("{shared}", shared) for a in self.args]


@dataclass(frozen=True)
class ScaleInputs:
    """What ``bench.scale`` writes beside its synthetic corpus, for the builders' limits: the
    corpus hosts, the WCEP stories, the first test day of those stories and a question file."""

    root: str
    hosts: tuple[str, ...]
    stories: tuple[str, ...]
    test_start: dt.date
    questions: str


@dataclass(frozen=True)
class Builder(Generic[C, S]):
    """The one declaration of a builder (see the module docstring).

    ``tables``: every output table by name with its partition columns (``rejected`` included;
    ``eval_items`` is the kit's, by split). ``event``: what one event is, for the audit's split
    check (None: no split check). ``retrieval``: the evaluation's settings for its items (None:
    the evaluation's defaults). ``scale``: the Config fields of its ``bench.scale`` run (None:
    not benched). ``plan``: the text ``--plan`` prints (default: the stage plans).
    ``details``: the builder's own fields of the ``Result``. ``quality``: its part of the
    quality gate every item passes before it is written (``pipelines.quality``).
    """

    name: str
    config: type[C]
    inputs: Inputs
    state: Callable[[], S]
    steps: tuple[Step, ...]
    finish: Callable[[Build[C], S], Outputs]
    tables: Mapping[str, tuple[str, ...]]
    demo: Demo
    event: EventKey | None = None
    retrieval: RetrievalConfig | None = None
    scale: Callable[[ScaleInputs], dict[str, Any]] | None = None
    plan: Callable[[Build[C], S], str] | None = None
    details: Callable[[S], dict[str, Any]] | None = None
    quality: Quality = field(default_factory=Quality)

    def run(self, config: C) -> Result:
        """Build the benchmark (``build``)."""
        return build(self, config)


def build(builder: Builder[C, S], config: C) -> Result:
    """Run a builder: preamble, steps, plan exit, finish, check, writes (module docstring)."""
    c: Any = config
    runner = StageRunner(c.root, builder.name, c.llm, force=c.force, plan_only=c.plan)
    b = Build(config, runner, Ledger(runner))
    inputs = builder.inputs
    b.ledger.inputs(*inputs.tables, any_of=inputs.any_of, optional=inputs.optional)
    state = builder.state()
    for step in builder.steps:
        step(b, state)
        if b.stopped is not None:
            print(f"{builder.name}: {b.stopped}")
            break
    if c.plan:
        if b.stopped is None:
            print(builder.plan(b, state) if builder.plan else StagePlan.table(runner.plans))
        return Result({}, b.ledger.summaries, None, runner.plans, details=_details(builder, state))
    out = gate(builder, b, builder.finish(b, state))
    b.ledger.check()  # counts reconcile, or nothing is written
    tables, card = write(builder, b, out)
    print(b.ledger.table())
    computed = sum(s.metrics.get("requests_computed", 0) for s in runner.summaries)
    return Result(
        tables, b.ledger.summaries, card, requests_computed=computed, details=_details(builder, state)
    )


def _details(builder: Builder[Any, S], state: S) -> dict[str, Any]:
    return builder.details(state) if builder.details else {}


def write(builder: Builder[Any, Any], b: Build[Any], out: Outputs) -> tuple[dict[str, pa.Table], dict | None]:
    """Write a run's outputs in order: tables, rejected rows, ``commit``, evaluation items, card.
    Returns the tables written (by name) and the card."""
    root, name = b.config.root, builder.name
    written = {}
    for table_name, table in out.tables.items():
        if table_name != "rejected":
            _write_table(root, name, table_name, table, builder.tables[table_name], out.partitions)
            written[table_name] = table
    if builder.tables["rejected"]:  # partitioned: as one table over the run's partitions
        rejected = b.ledger.rejected_table()
        _write_table(root, name, "rejected", rejected, builder.tables["rejected"], out.partitions)
        written["rejected"], n_rejected = rejected, rejected.num_rows
    else:  # streamed from the ledger's spill files
        n_rejected = b.ledger.write_rejected()
        if "rejected" in out.tables:
            written["rejected"] = out.tables["rejected"]
    if out.commit is not None:
        out.commit()
    if out.items is not None:
        written["eval_items"] = write_eval_items(root, name, out.items)
    card = None
    if out.counts is not None:
        section = quality_section(
            written.get("eval_items", pa.table({})),
            b.ledger.rejected_counts().get("quality", {}),
            _event_of(builder, written),
            builder.quality.paper,
        )
        steps = [_step(s, {r.name for r in b.runner.summaries}) for s in b.ledger.summaries]
        card = write_card(root, name, b.runner, out.counts(written, n_rejected), b.config, section, steps)
    return written, card


def _step(summary: RunSummary, stages: set[str]) -> dict[str, Any]:
    """One step of the run for the card (the report's funnel, in run order)."""
    return {
        "step": summary.name.split("/", 1)[-1],
        "unit": "LLM request" if summary.name in stages else "rows",
        "read": summary.rows_read,
        "kept": summary.rows_written,
        "rejected": dict(sorted(summary.rejected.items())),
    }


def _event_of(
    builder: Builder[Any, Any], tables: Mapping[str, pa.Table]
) -> Callable[[dict], str | None] | None:
    """An item's source article or event (the card's items per source), from this run's tables."""
    event = builder.event
    if event is None:
        return None
    key_of = {
        i: k
        for name in event.tables
        if name in tables
        for i, k in zip(
            tables[name].column(event.id_column).to_pylist(),
            tables[name].column(event.key_column).to_pylist(),
            strict=True,
        )
    }
    return lambda item: key_of.get(item.get("source_id"))


def _write_table(
    root: str,
    name: str,
    table_name: str,
    table: pa.Table,
    partition_cols: tuple[str, ...],
    partitions: Sequence[Any] | None,
) -> None:
    """One table: whole, or (``partitions``) exactly those partitions of its one partition
    column, each removed first so a partition left without rows is gone too."""
    if partitions is None:
        write_benchmark_table(root, name, table_name, table, partition_cols)
        return
    (column,) = partition_cols
    for value in partitions:
        storage.delete(Layout(root).benchmark(name, table_name, f"{column}={value}"))
    if table.num_rows:
        write_benchmark_table(root, name, table_name, table, partition_cols, replace="partitions")


# ---------------------------------------------------------------------------- the registry
def modules() -> dict[str, str]:
    """Every registered builder's module by builder name, in ``MODULES`` order."""
    return {importlib.import_module(module).BUILDER.name: module for module in MODULES}


def registry() -> dict[str, Builder[Any, Any]]:
    """Every registered builder by name, in ``MODULES`` order."""
    return {name: importlib.import_module(module).BUILDER for name, module in modules().items()}


def get(name: str) -> Builder[Any, Any] | None:
    """The builder of a benchmark, or None (an imported benchmark, e.g. ForecastQA)."""
    return registry().get(name)


def event_key(name: str) -> EventKey | None:
    """What one event of benchmark ``name`` is (the audit's split check); None: unknown."""
    builder = get(name)
    return builder.event if builder else None


def retrieval() -> dict[str, RetrievalConfig]:
    """The evaluation's retrieval settings of every builder that declares them."""
    return {name: b.retrieval for name, b in registry().items() if b.retrieval is not None}


def demo(name: str, root: str, shared: str) -> None:
    """Run one builder as the demo does: ``python -m <its module> --root ROOT <its demo flags>``
    (printed first), in this process."""
    module = modules()[name]
    spec = registry()[name].demo
    argv = ["--root", root, *spec.argv(shared)]
    print(f"{spec.title}\n$ python -m {module} {shlex.join(argv)}", flush=True)
    sys.argv = [f"python -m {module}", *argv]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def ready(written: Sequence[str]) -> list[str]:
    """The builders whose inputs are all written: every table they read, optional ones included
    (a table written later would change what they read), among the ``written`` paths (e.g.
    ``corpus/articles``), and ``index`` among them if they search the article index."""
    done = set(written)

    def reads(builder: Builder[Any, Any]) -> set[str]:
        inputs = builder.inputs
        return {t.path for t in (*inputs.tables, *inputs.optional)} | ({"index"} if inputs.index else set())

    return [name for name, builder in registry().items() if reads(builder) <= done]


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``names`` lists the builders (the demo's order), ``demo NAME ROOT
    SHARED`` runs one with its demo flags on the sample data in SHARED."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.builders", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    names = commands.add_parser("names", help="the registered builders, one per line, in the demo's order")
    names.add_argument(
        "--ready",
        metavar="WRITTEN",
        help="only those whose inputs are all written: comma-separated table paths under the root "
        "(corpus/articles, ...) and 'index' once the article index is built",
    )
    run = commands.add_parser("demo", help="run one builder with its demo flags")
    run.add_argument("name", choices=list(modules()))
    run.add_argument("root", help="the root URI the demo writes under")
    run.add_argument("shared", help="the sample data directory (../shared/data)")
    args = parser.parse_args(argv)
    if args.command == "names":
        print("\n".join(modules() if args.ready is None else ready(args.ready.split(","))))
    else:
        demo(args.name, args.root, args.shared)


if __name__ == "__main__":
    from pipelines.builders import main as registry_main  # the module its builders import

    registry_main()
