"""Every builder writes its dropped rows to ``benchmarks/<name>/rejected`` in the kit's one schema.

The four builders run on the real sample corpus with a script that answers nothing, so every LLM
request ends as an engine error: small, quick builds whose rejected tables are certainly not
empty. One reader (``read_rejected``) reads all four with the one schema."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from pipelines import daily_oracle, openforecast, tcelongbench
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import REJECTED_SCHEMA, read_rejected
from pipelines.prophet.build import run as run_prophet
from pipelines.prophet.config import Config as ProphetConfig

pytestmark = [pytest.mark.ray, pytest.mark.spark]

SILENT = LLMConfig(backend="scripted", script={})  # every request: "engine: no script for prompt …"


def test_four_builders_write_rejected_rows_in_one_schema(ray_local, root_with_corpus, tmp_path):
    root = root_with_corpus
    openforecast.run(openforecast.Config(root=root, llm=SILENT, limit=1, test_start=dt.date(2026, 3, 1)))
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps(
            {"id": "q1", "question": "Will the storm hit?", "resolution_date": "2022-09-20", "answer": 1}
        )
        + "\n"
    )
    run_prophet(ProphetConfig(root=root, questions=str(questions), llm=SILENT))
    tcelongbench.run(tcelongbench.Config(root=root, llm=SILENT, min_cluster_size=3, min_samples=2, limit=1))
    daily_oracle.run(
        daily_oracle.Config(
            root=root,
            llm=SILENT,
            dates=tuple(dt.date(2022, 9, d) for d in range(15, 19)),
            publishers=("npr.org", "chicago.suntimes.com", "abc7.com"),
            n_random=1,
            n_hot=1,
        )
    )
    seen = {}
    for name in ("openforecast", "prophet", "tcelongbench", "daily_oracle"):
        table = read_rejected(root, name)
        assert table.num_rows > 0, name
        assert table.schema.equals(REJECTED_SCHEMA, check_metadata=False), name
        rows = table.to_pylist()
        assert all(r["stage"] and r["reason"] and r["unit"] for r in rows), name
        assert not any(r["not_run"] for r in rows), name
        seen[name] = {r["reason"] for r in rows}
    assert "engine_error" in seen["openforecast"] | seen["tcelongbench"]
    assert "engine_error" in seen["prophet"]
    assert any(reason.endswith("engine_error") for reason in seen["daily_oracle"])
    combined = pa.concat_tables(read_rejected(root, n) for n in seen)
    assert combined.num_rows == sum(read_rejected(root, n).num_rows for n in seen)
