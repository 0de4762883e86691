"""The builder's LLM stages: prompt, parser, parsed columns and variables, per stage.

- ``query_entities`` / ``query_steps`` / ``query_similar``: prompts (a)–(c), a list of queries;
- ``relevance``: prompt (d), a generated ``Rating: n`` or (``--rating score``) a choice over 1–6;
- ``joint`` / ``conditional``: the CIL terms of the configured estimator and layout, r samples.

Generated answers are capped by ``--max-new-tokens`` (``LLMConfig.max_new_tokens``, applied by
the stage runner). Every generated and verbalized stage declares its answer form for that budget
(``udfs.prophet.outputs``): the prompt file declares it for the prompt's own ``max_tokens`` and
the default options, the stage narrows it to the options and the cap of the run
(``BuilderStage.form``, asked by the ledger), so an answer the engine constrains always ends
inside its budget. Input cuts are in words (``udfs.text.first_words``); an empty background or
resolution criteria is shown as ``(none)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import pyarrow as pa

from pipelines.llm.attempts import BuilderStage
from pipelines.llm.stage import LLMStage
from pipelines.prophet.config import Config
from udfs.prophet import outputs
from udfs.prophet.layout import PromptArticle, conditional_variables, joint_variables, prompt_ids, snippet
from udfs.prophet.parsing import parse_query_list, parse_rating
from udfs.prophet.plan import ConditionalTerm, JointTerm
from udfs.text import first_words

QUERY_PROMPTS = {
    "entities": "prophet.query_entities",
    "steps": "prophet.query_steps",
    "similar": "prophet.query_similar",
}
QUERIES_PARSED = pa.schema([pa.field("queries", pa.list_(pa.string()))])
RATING_PARSED = pa.schema([pa.field("rating", pa.int32())])


def query_stage(kind: str, config: Config) -> LLMStage:
    """Query generation with prompt (a) ``entities``, (b) ``steps`` or (c) ``similar``; the
    entities list is not cut, the other two keep at most ``num_queries`` items."""

    def variables(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "question": row["question"],
            "background": first_words(row["background"], config.context_words).strip() or "(none)",
            "date": row["resolution_date"].isoformat(),
            "num_queries": config.num_queries,
            "max_words": config.max_words,
        }

    items, words = (
        (outputs.ENTITY_ITEMS, outputs.ENTITY_WORDS)
        if kind == "entities"
        else (config.num_queries, config.max_words)
    )
    return BuilderStage(
        f"query_{kind}",
        QUERY_PROMPTS[kind],
        parser=partial(parse_query_list, limit=None if kind == "entities" else config.num_queries),
        parsed_schema=QUERIES_PARSED,
        variables=variables,
        seed=config.seed,
        form=lambda tokens: {"regex": outputs.query_regex(items, words, tokens)},
    )


def relevance_stage(
    config: Config, questions: Mapping[str, dict[str, Any]], articles: Mapping[str, dict[str, Any]]
) -> LLMStage:
    """Prompt (d) over (question_id, article_id) rows: generated and parsed, or scored over 1–6."""

    def variables(row: dict[str, Any]) -> dict[str, Any]:
        q, a = questions[row["question_id"]], articles[row["article_id"]]
        return {
            "question": q["question"],
            "background": first_words(q["background"], config.context_words).strip() or "(none)",
            "resolution_criteria": first_words(q["resolution_criteria"], config.context_words).strip()
            or "(none)",
            "article": snippet(a["title"], a["text"], config.rating_words),
        }

    if config.rating == "generate":
        return BuilderStage(
            "relevance",
            "prophet.relevance",
            parser=parse_rating,
            parsed_schema=RATING_PARSED,
            variables=variables,
            seed=config.seed,
            form=lambda tokens: {"regex": outputs.rating_regex(tokens)},
        )
    return LLMStage("relevance", "prophet.relevance_score", variables=variables, seed=config.seed)


def verbalized_form(tokens: int) -> dict[str, str]:
    """A verbalized CIL answer's form for its token budget."""
    return {"regex": outputs.verbalized_regex(tokens)}


def cil_stages(
    config: Config, articles: Mapping[str, PromptArticle], question_texts: Mapping[str, str]
) -> tuple[LLMStage, LLMStage]:
    """The joint and conditional stages of the configured estimator and layout, r samples each,
    over the request tables of ``udfs.prophet.requests.plan_requests``."""
    joint_id, conditional_id = prompt_ids(config.estimator, config.layout)

    def joint_vars(row: dict[str, Any]) -> dict[str, Any]:
        term = JointTerm(row["bin"], tuple(row["window_ids"]), row["bits"])
        return joint_variables(term, articles, config.layout)

    def conditional_vars(row: dict[str, Any]) -> dict[str, Any]:
        term = ConditionalTerm(row["article_id"], row["bin"], row["x"], tuple(row["window_ids"]), row["bits"])
        return conditional_variables(term, articles, question_texts[row["question_id"]], config.layout)

    def stage(name: str, prompt_id: str, variables: Any) -> LLMStage:
        """r samples per request; verbalized answers get their form for the stage's budget (Yes/No
        choice prompts declare none)."""
        form = verbalized_form if config.estimator == "verbalized" else None
        return BuilderStage(
            name, prompt_id, variables=variables, samples=config.r, seed=config.seed, form=form
        )

    return stage("joint", joint_id, joint_vars), stage("conditional", conditional_id, conditional_vars)
