"""The README.md of a benchmark exported for the Hugging Face Hub: YAML front matter in the Hub's
dataset-card form (configs with data_files, dataset_info features and splits, task categories,
licence) and the card's text (construction, model, prompt versions, corpus span, quality,
rejects, licence of the sources). Pure: the caller reads the root and passes plain data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import yaml

from udfs.report_view import quality_rows

# Arrow type → the Hub's ``dtype`` name (datasets' Value types).
DTYPES = {
    pa.string(): "string",
    pa.large_string(): "large_string",
    pa.bool_(): "bool",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.float32(): "float32",
    pa.float64(): "float64",
    pa.date32(): "date32",
}


def dtype(t: pa.DataType) -> str:
    if t in DTYPES:
        return DTYPES[t]
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, tz={t.tz}]" if t.tz else f"timestamp[{t.unit}]"
    raise ValueError(f"no Hub feature type for Arrow type {t}")


def features(schema: pa.Schema) -> list[dict[str, Any]]:
    """``dataset_info.features`` for an Arrow schema of flat columns and lists of them."""
    out = []
    for f in schema:
        if pa.types.is_list(f.type):
            out.append({"name": f.name, "list": dtype(f.type.value_type)})
        else:
            out.append({"name": f.name, "dtype": dtype(f.type)})
    return out


@dataclass(frozen=True)
class Source:
    """Where part of a benchmark comes from, and the terms its material is under."""

    title: str
    license: str | None  # a Hub licence id, or None when the rights stay with their owners
    terms: str


SOURCES = {
    "news": Source(
        "news articles (Common Crawl news crawl, publishers' pages)",
        None,
        "The articles' text belongs to their publishers; it is not in this dataset. Items name "
        "articles by id (look them up in the augury corpus they were built from, or by URL); "
        "text a language model wrote from them (questions, answers, timelines) is machine-generated.",
    ),
    "wikipedia": Source(
        "Wikipedia pages and the Wikipedia Current Events Portal",
        "cc-by-sa-4.0",
        "Wikipedia text is licensed CC BY-SA 4.0; material derived from it is shared under the same licence.",
    ),
    "forecastbench": Source(
        "ForecastBench question sets (Forecasting Research Institute)",
        "cc-by-sa-4.0",
        "ForecastBench questions, backgrounds and resolutions are licensed CC BY-SA 4.0; items "
        "carrying them are shared under the same licence.",
    ),
}

# What each builder's items are made from (to move into the builder registry with the builders).
BUILDER_SOURCES: dict[str, tuple[str, ...]] = {
    "daily_oracle": ("news",),
    "prophet": ("forecastbench", "news"),
    "openforecast": ("wikipedia", "news"),
    "tcelongbench": ("news",),
}

ABOUT = {
    "daily_oracle": "Daily Oracle (ICML 2025): yes/no and multiple-choice questions written each day "
    "from that day's news, kept when they pass a seven-principle filter.",
    "prophet": "PROPHET (2025): resolved binary questions with news evidence per question, each "
    "article scored by its causal intervened likelihood (CIL); questions split into inferable (L1) "
    "and not (L2).",
    "openforecast": "OpenForecast (COLING 2025): complex events from Wikipedia and the Current "
    "Events Portal, timelines by extraction then complement, and six open and closed tasks.",
    "tcelongbench": "TCELongBench (2024): temporal complex events clustered from news, day-by-day "
    "outlines, and detail, ordering and forecasting questions.",
}

TYPE_CATEGORIES = {
    "yesno": ("question-answering", "multiple-choice"),
    "mc": ("question-answering", "multiple-choice"),
    "binary_prob": ("question-answering", "text-classification"),
    "ordering": ("question-answering",),
    "open": ("question-answering", "text-generation"),
}

FIELDS = {
    "item_id": "unique id of the item within the benchmark",
    "benchmark": "the benchmark's name",
    "task": "the task (one config per task)",
    "split": "the split (by event time, never random across time)",
    "type": "yesno, mc, binary_prob, ordering or open",
    "question": "the question as a forecaster sees it",
    "background": "context lines given with the question",
    "choices": "answer options (yesno: Yes, No)",
    "gold_index": "index of the right choice (yesno, mc)",
    "gold_order": "choice indexes in chronological order (ordering)",
    "gold_value": "1 if the event happened, else 0 (binary_prob)",
    "gold_texts": "reference answers (open)",
    "t_cut": "information cutoff, UTC, exclusive: nothing published at or after it may be shown",
    "t_resolve": "when the answer became known",
    "context_article_ids": "articles the item may use, when fixed",
    "context_scores": "the builder's score of each context article (PROPHET: CIL)",
    "gold_article_ids": "articles the answer was taken from (published after the cutoff)",
    "evidence_article_ids": "articles inside the context that hold the answer, when known",
    "evidence_dates": "days of the evidence, when known",
    "category": "topic category",
    "source_id": "the builder's own id of the question",
    "query": "what retrieval searches for, when the builder wrote it",
}


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` value for ``n`` rows."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
    return next((label for bound, label in bounds if n < bound), "n>1M")


def licence(name: str) -> tuple[dict[str, str], list[Source]]:
    """The front matter's licence keys and the sources' terms: CC BY-SA 4.0 when any source is
    share-alike; otherwise ``other``, explained in LICENSE.md."""
    sources = [SOURCES[s] for s in BUILDER_SOURCES.get(name, ())]
    ids = {s.license for s in sources if s.license}
    if ids:
        return {"license": sorted(ids)[0]}, sources
    return {"license": "other", "license_name": "source-terms", "license_link": "LICENSE.md"}, sources


def front_matter(
    name: str,
    files: Mapping[str, Mapping[str, str]],
    counts: Mapping[str, Mapping[str, int]],
    sizes: Mapping[str, Mapping[str, int]],
    schema: pa.Schema,
    types: Sequence[str],
) -> dict[str, Any]:
    """The YAML front matter: one config per task (``files[task][split]`` = path) plus ``all``
    (the default: every task), their features and split sizes (rows, Arrow bytes), and the tags."""
    if "all" in files:
        raise ValueError("a task named 'all' would clash with the config of every task")
    feats = features(schema)
    splits = sorted({s for per in files.values() for s in per})
    configs = [
        {
            "config_name": "all",
            "default": True,
            "data_files": [
                {"split": s, "path": [files[t][s] for t in sorted(files) if s in files[t]]} for s in splits
            ],
        }
    ]
    info = [
        _info(
            "all",
            feats,
            {s: sum(counts[t].get(s, 0) for t in counts) for s in splits},
            {s: sum(sizes[t].get(s, 0) for t in sizes) for s in splits},
        )
    ]
    for task in sorted(files):
        configs.append(
            {
                "config_name": task,
                "data_files": [{"split": s, "path": p} for s, p in sorted(files[task].items())],
            }
        )
        info.append(_info(task, feats, counts[task], sizes[task]))
    categories = sorted({c for t in types for c in TYPE_CATEGORIES.get(t, ("question-answering",))})
    total = sum(n for per in counts.values() for n in per.values())
    keys, _ = licence(name)
    return {
        "pretty_name": f"augury {name}",
        **keys,
        "language": ["en"],
        "task_categories": categories,
        "tags": ["forecasting", "temporal-reasoning", "event-forecasting", "augury", name],
        "size_categories": [size_category(total)],
        "annotations_creators": ["machine-generated"],
        "configs": configs,
        "dataset_info": info,
    }


def _info(
    config: str, feats: list[dict[str, Any]], rows: Mapping[str, int], size: Mapping[str, int]
) -> dict[str, Any]:
    """One config's ``dataset_info``: features, and per split its rows and bytes."""
    splits = [{"name": s, "num_bytes": size[s], "num_examples": rows[s]} for s in sorted(rows)]
    return {"config_name": config, "features": feats, "splits": splits, "dataset_size": sum(size.values())}


class _Plain(yaml.SafeDumper):
    """Writes a repeated value in full each time (no ``&id``/``*id`` anchors in the card)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def readme(matter: dict[str, Any], body: str) -> str:
    """README.md: the front matter between ``---`` lines, then the text."""
    front = yaml.dump(matter, Dumper=_Plain, sort_keys=False, allow_unicode=True)
    return "---\n" + front + "---\n\n" + body


def body(
    name: str,
    card: Mapping[str, Any],
    counts: Mapping[str, Mapping[str, int]],
    span: Mapping[str, str],
    rejected: Mapping[tuple[str, str, str], int],
    hosts: Mapping[str, int],
) -> str:
    """The card's text: what the benchmark is, how to load it, its fields, how it was built,
    its quality, what was rejected and the terms of its sources."""
    splits = sorted({s for per in counts.values() for s in per})
    lines = [f"# augury {name}", "", ABOUT.get(name, f"The {name} benchmark built by augury."), ""]
    lines += [
        "Built by augury, which turns raw web data into event-forecasting benchmarks. Every item "
        "has an information cutoff `t_cut`: nothing published at or after it may reach a forecaster.",
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'items = load_dataset("path/or/hub-id", "all")  # or one task: {", ".join(repr(t) for t in sorted(counts))}',
        "```",
        "",
        "## Configurations and splits",
        "",
        "| config | " + " | ".join(splits) + " |",
        "| --- | " + " | ".join("---:" for _ in splits) + " |",
    ]
    for task in sorted(counts):
        lines.append(f"| {task} | " + " | ".join(str(counts[task].get(s, 0)) for s in splits) + " |")
    lines += ["", "## Fields", "", "| field | meaning |", "| --- | --- |"]
    lines += [f"| `{k}` | {v} |" for k, v in FIELDS.items()]
    model = card.get("model") or {}
    lines += [
        "",
        "## How it was built",
        "",
        f"- built: {card.get('built_at', 'not recorded')}",
        f"- model: `{model.get('model', '?')}` (backend `{model.get('backend', '?')}`)",
        f"- questions' cutoffs: {span.get('t_cut', 'not recorded')}",
        f"- articles referenced, published: {span.get('articles', 'none referenced')}",
        f"- corpus articles' days: {span.get('corpus', 'not recorded')}",
        "- prompt versions: "
        + (", ".join(f"{k} `{v}`" for k, v in (card.get("prompt_versions") or {}).items()) or "none"),
    ]
    total = (card.get("llm_cost") or {}).get("total") or {}
    if total:
        lines.append(
            f"- LLM requests: {total.get('requests_total', 0):,} ({total.get('requests_computed', 0):,} computed), "
            f"tokens in / out: {total.get('input_tokens', 0):,} / {total.get('output_tokens', 0):,}"
        )
    lines += ["", "## Quality", ""]
    quality = card.get("quality")
    lines += [f"- {t}: {v}" for t, v in quality_rows(quality)] if quality else ["Not recorded in the card."]
    lines += ["", "## Rejected candidates", ""]
    if rejected:
        lines += ["| step | unit | reason | rows |", "| --- | --- | --- | ---: |"]
        lines += [f"| {s} | {u} | {r} | {n:,} |" for (s, u, r), n in rejected.items()]
    else:
        lines.append("No rejected rows recorded.")
    lines += ["", "## Licence and sources", ""]
    _, sources = licence(name)
    lines += [f"- {s.title}: {s.terms}" for s in sources] or [
        "- Sources not declared for this builder: check before publishing."
    ]
    if hosts:
        lines.append(
            "- Referenced news articles by host: " + ", ".join(f"{h} ({n})" for h, n in hosts.items()) + "."
        )
    return "\n".join([*lines, ""])


def licence_text(name: str) -> str:
    """LICENSE.md: the terms of each source of the benchmark."""
    keys, sources = licence(name)
    lines = [f"# Terms of augury {name}", "", f"Hub licence id: `{keys['license']}`.", ""]
    for s in sources:
        lines += [f"## {s.title}", "", s.terms, ""]
    return "\n".join(lines)
