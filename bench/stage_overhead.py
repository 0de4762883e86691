"""The stage runner's own cost: one stage against a bare Ray Data pipeline on the same rows.

    python -m bench.stage_overhead [--rows 20000] [--repeat 3]

``--rows`` distinct rows (a country name and a number) go through one generate stage
(``smoke.capital``, its answer parsed by ``first_line``) on the scripted backend, which answers
at once: no model time, so what is measured is everything around the engine — rendering,
request keys, duplicate and cache checks, response shards, assembly, the output read back.

The baseline is what a competent user writes with Ray Data where ``ray.data.llm``'s Processor
cannot run (no vLLM here), in the Processor's own shape: a preprocess ``map_batches`` renders
each row's prompt through the model's chat template (the very text the stage sends), the same
scripted engine answers it as a ``map_batches`` stage on one actor with the same batch size,
a postprocess ``map_batches`` parses the answer with the same parser, and ``write_parquet``
writes the rows, which are read back into one table (the stage returns its table too). Both
read the rows from the driver in blocks of 1,024. Before timing, each side runs once untimed on
the same rows (Ray's workers start and load the tokenizer, once each), then the two sides
alternate ``--repeat`` times on fresh directories; each side's time is its median, and the two
outputs must hold the same answers. Ray Data executions are counted by an ``ExecutionCallback`` registered on the
``DataContext`` (Ray calls it as each execution starts), during each stage run.

The last line printed is one JSON object: ``{"rows", "stage_s", "bare_s", "ratio",
"ray_executions"}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray.data
from ray.data._internal.execution.execution_callback import ExecutionCallback

from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray
from pipelines.llm.render import RenderConfig, Tokenizing
from pipelines.llm.scripted import ScriptedEngine, ship_script
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line
from udfs.llm_parsing import ParseError
from udfs.prompts import load_prompt

BLOCK_ROWS = 1024
STAGE = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA)


def capital(variables: dict) -> str:
    return f"Capital of {variables['country']}"


LLM = LLMConfig(backend="scripted", script={"smoke.capital": capital})


class Executions(ExecutionCallback):
    """Counts the Ray Data executions that start in this process."""

    started = 0

    def before_execution_starts(self, executor) -> None:
        Executions.started += 1


def table(n: int) -> pa.Table:
    return pa.table({"country": [f"Country {i:06d}" for i in range(n)], "n": pa.array(range(n), pa.int64())})


def run_stage(rows: pa.Table, root: str, llm: LLMConfig) -> tuple[float, pa.Table, int]:
    before = Executions.started
    started = time.perf_counter()
    out = StageRunner(root, "bench", llm).run(STAGE, rows)
    return time.perf_counter() - started, out, Executions.started - before


class Preprocess(Tokenizing):
    """The baseline's preprocess: each row's prompt, as the engine receives it."""

    def __init__(self, cfg: RenderConfig):
        super().__init__(cfg)
        self.prompt = load_prompt(STAGE.prompt_id)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        n = len(rows)
        return (
            batch.append_column(
                "prompt_text", pa.array([self.prompt_text(self.prompt.render(r)) for r in rows])
            )
            .append_column("variables_json", pa.array([json.dumps(r) for r in rows]))
            .append_column("request_key", pc.cast(batch.column("n"), pa.string()))
            .append_column("mode", pa.repeat("generate", n))
            .append_column("prompt_id", pa.repeat(STAGE.prompt_id, n))
        )


class Engine(ScriptedEngine):
    """The scripted engine, each answer with its row's own columns (a Processor keeps them)."""

    def __call__(self, batch: pa.Table) -> pa.Table:
        answers = super().__call__(batch)
        return answers.append_column("country", batch.column("country")).append_column("n", batch.column("n"))


def postprocess(batch: pa.Table) -> pa.Table:
    """The baseline's postprocess: the parsed answer of each row."""
    answers = []
    for text in batch.column("generated_text").to_pylist():
        try:
            answers.append(first_line(text or "")["answer"])
        except ParseError:
            answers.append(None)
    return batch.append_column("answer", pa.array(answers, pa.string()))


def run_bare(rows: pa.Table, root: str) -> tuple[float, pa.Table]:
    started = time.perf_counter()
    blocks = [rows.slice(start, BLOCK_ROWS) for start in range(0, rows.num_rows, BLOCK_ROWS)]
    ds = ray.data.from_arrow(blocks).map_batches(Preprocess(RenderConfig.of(LLM)), batch_format="pyarrow")
    ds = ds.map_batches(
        Engine,
        fn_constructor_kwargs={"script": ship_script(LLM.script)},
        batch_size=LLM.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0,
    )
    ds.map_batches(postprocess, batch_format="pyarrow").write_parquet(f"{root}/bare")
    out = pq.read_table(f"{root}/bare")
    return time.perf_counter() - started, out


def answers(out: pa.Table) -> list[str]:
    return out.take(pc.sort_indices(out, [("n", "ascending")])).column("answer").to_pylist()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=20000, help="distinct input rows of the stage")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side, alternating")
    parser.add_argument(
        "--shard-size", type=int, default=LLM.shard_size, help="the stage's requests per response shard"
    )
    args = parser.parse_args(argv)
    llm = LLM.replace(shard_size=args.shard_size)

    ensure_ray(LLM)
    ray.data.DataContext.get_current().custom_execution_callback_classes.append(Executions)
    rows = table(args.rows)
    with tempfile.TemporaryDirectory() as work:
        run_stage(rows, f"{work}/warm-stage", llm)
        run_bare(rows, f"{work}/warm-bare")
        stage_s, bare_s, executions = [], [], []
        for i in range(args.repeat):
            seconds, ours, count = run_stage(rows, f"{work}/stage-{i}", llm)
            stage_s.append(seconds)
            executions.append(count)
            seconds, bare = run_bare(rows, f"{work}/bare-{i}")
            bare_s.append(seconds)
            if answers(ours) != answers(bare) or ours.num_rows != args.rows:
                raise AssertionError("the stage and the baseline answered differently")
    stage, base = statistics.median(stage_s), statistics.median(bare_s)
    print(
        f"{args.rows:,} rows, scripted backend (no model time), batch size {llm.batch_size}, shards of {llm.shard_size}"
    )
    print(f"{'':<10}{'median s':>10}   runs")
    print(f"{'stage':<10}{stage:>10.2f}   {', '.join(f'{s:.2f}' for s in stage_s)}")
    print(f"{'bare':<10}{base:>10.2f}   {', '.join(f'{s:.2f}' for s in bare_s)}")
    print(f"Ray Data executions per stage run: {executions}")
    summary = {
        "rows": args.rows,
        "stage_s": round(stage, 3),
        "bare_s": round(base, 3),
        "ratio": round(stage / base, 3),
        "ray_executions": max(executions),
    }
    out = Path("bench/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"stage_overhead-{args.rows}.json").write_text(
        json.dumps(
            {**summary, "stage_runs_s": stage_s, "bare_runs_s": bare_s, "executions": executions}, indent=2
        )
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
