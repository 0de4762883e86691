"""A demo-sized root for the report and export tests, built once per session by the real small
pipeline: the sample corpus (``corpus_root``) plus the reported.ly articles, three builders on
the scripted backend with the scripts of their own tests (Daily Oracle on one news day,
OpenForecast on three Current Events Portal stories, TCELongBench on the reported.ly month), a
closed-book evaluation by a scripted forecaster, and the audit. Nothing is committed: every
table is what the pipeline writes today."""

from __future__ import annotations

import datetime as dt
import shutil

import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ship_script

LETTERS = "ABCDEFGHIJ"


def forecast_choice(v: dict) -> dict[str, float]:
    """Leans to the first option: a fixed forecaster whose answers are sometimes right."""
    labels = [c["label"] for c in v["choices"]] if v["choices"] else ["Yes", "No"]
    rest = 0.4 / (len(labels) - 1)
    return {label: 0.6 if k == 0 else rest for k, label in enumerate(labels)}


FORECASTER = {
    "evaluate.forecast_choice": forecast_choice,
    "evaluate.forecast_order": lambda v: " " + ",".join(LETTERS[: len(v["choices"])]),
    "evaluate.forecast_events": lambda v: " Officials respond to the events.\n2. Observers follow the story.",
    "evaluate.forecast_answer": lambda v: " The government",
    "evaluate.judge_match": lambda v: "No",
    "evaluate.judge_evidence": lambda v: "No",
    "evaluate.judge_answer": lambda v: "No",
}


@pytest.fixture(scope="session")
def demo_root(corpus_root, shared_data, ray_local, built_once) -> str:
    return built_once("demo", lambda root: _build(str(root), corpus_root, shared_data))


def _build(root: str, corpus_root: str, shared_data) -> None:
    """The demo-like root: the corpus copied, then the builders, the evaluation and the audit."""
    from pipelines.audit import run as audit_run
    from pipelines.daily_oracle import Config as DailyOracle
    from pipelines.daily_oracle import run as daily_oracle
    from pipelines.evaluate import run as evaluate
    from pipelines.openforecast import run as openforecast
    from pipelines.tcelongbench import Config as TCELongBench
    from pipelines.tcelongbench import run as tcelongbench
    from tests.pipelines import daily_oracle_script as do_test
    from tests.pipelines import test_openforecast_pipeline as of_test
    from tests.pipelines import test_tcelongbench_pipeline as tlb_test

    shutil.copytree(corpus_root, root)
    tlb_test.write_reportedly_articles(root, shared_data)  # adds 2015 days and re-indexes
    daily_oracle(
        DailyOracle(
            root=root,
            dates=(dt.date(2022, 9, 15),),
            publishers=do_test.PUBLISHERS,
            llm=LLMConfig(backend="scripted", script=ship_script(do_test.SCRIPT)),
        )
    )
    openforecast(of_test._config(root))
    tcelongbench(
        TCELongBench(
            root=root,
            topic_hosts=("reported.ly",),
            llm=LLMConfig(backend="scripted", script=ship_script(tlb_test.SCRIPT)),
            **tlb_test.DEMO,
        )
    )
    evaluate.run(
        evaluate.Config(
            root=root,
            llm=LLMConfig(backend="scripted", model="leans-first", script=ship_script(FORECASTER)),
            modes=("closed_book",),
            answer_formats=("choice",),
            limit=4,
        )
    )
    audit_run.run(audit_run.Config(root=root))
