"""CIL cost: the naive per-article method against ours, in requests and prompt tokens computed.

    python -m bench.cil_cost                      # the spec's two worked examples
    python -m bench.cil_cost --demo-root out      # ... and the questions of a finished demo run

Methods (spec §6, one question at a time):
- naive: every article requests its own joint table, the paper's layout (prompts (e)/(f) with
  the window grouped under happened / did not happen), verbalized, r = 2;
- ours, verbalized: joint table once per bin, listed layout, r = 2;
- ours, logprob: joint table once per bin, listed layout, one Yes/No scoring pass per term.

Figures per method: LLM requests; prompt tokens in total and those an engine must compute after
an ideal block prefix cache (vLLM-style 16-token blocks: a request reuses the longest cached
block-aligned prefix of any earlier request of the same question; the last token is always
computed); generated tokens (verbalized: each prompt's max_tokens budget; logprob: 1). Tokens
come from the embedded model's tokenizer. A deterministic stand-in answers every term, and the
naive per-article CIL must equal ours. Results go to ``bench/results/cil_cost.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udfs import storage
from udfs.layout import Layout
from udfs.prompts import load_prompt
from udfs.prophet.cil import EvidenceArticle, cil_terms, normalize_joint
from udfs.prophet.layout import PromptArticle, conditional_variables, joint_variables, prompt_ids, snippet
from udfs.prophet.plan import QuestionPlan, assemble, naive_joint_terms, plan_question
from udfs.prophet.prefix_cache import PrefixCache, segments
from udfs.prophet.worked_examples import (
    QUESTION,
    RESOLUTION_DATE,
    SURGE,
    UNIFORM,
    example_articles,
    example_texts,
)

RESULTS = Path(__file__).resolve().parent / "results" / "cil_cost.json"


@dataclass(frozen=True)
class Scenario:
    name: str
    question: str
    resolution_date: dt.date
    answer: int
    articles: list[EvidenceArticle]
    texts: dict[str, PromptArticle]
    w: int
    k_max: int


@dataclass(frozen=True)
class Method:
    name: str
    estimator: str
    layout: str
    repeats: int
    shared_joint: bool


METHODS = (
    Method("naive", "verbalized", "grouped", 2, False),
    Method("ours-verbalized", "verbalized", "listed", 2, True),
    Method("ours-logprob", "logprob", "listed", 1, True),
)


def _unit(*parts: object) -> float:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:13], 16) / 16**13


def requests(
    plan: QuestionPlan, question: str, texts: dict[str, PromptArticle], m: Method
) -> Iterator[tuple[str, dict]]:
    """The distinct prompts of a method in request order (each is sent ``m.repeats`` times):
    naive = per article, its joint table then its conditionals; ours = per bin, the shared
    joint table, then each article's conditionals."""
    joint_id, conditional_id = prompt_ids(m.estimator, m.layout)
    joints: dict[object, list] = {}
    for article_id, term in naive_joint_terms(plan):
        joints.setdefault(article_id, []).append(term)
    for term in plan.joints if m.shared_joint else ():
        joints.setdefault(term.bin, []).append(term)
    conditionals: dict[str, list] = {}
    for term in plan.conditionals:
        conditionals.setdefault(term.article_id, []).append(term)
    for g, group in plan.bins.items():
        for term in joints.get(g, []):
            yield joint_id, joint_variables(term, texts, m.layout)
        for article in group:
            for term in [] if m.shared_joint else joints.get(article.article_id, []):
                yield joint_id, joint_variables(term, texts, m.layout)
            for term in conditionals[article.article_id]:
                yield conditional_id, conditional_variables(term, texts, question, m.layout)


def measure(s: Scenario, m: Method, tokenize, check: random.Random) -> dict[str, Any]:
    """Requests and tokens of one method on one question (one prefix cache per question). A
    sample of the prompts is also tokenized whole, to check the segment-wise tokenization."""
    plan = plan_question(s.name, s.resolution_date, s.articles, s.w, s.k_max)
    cache = PrefixCache(tokenize)
    n_requests = prompt_tokens = computed = generated = checked = 0
    budget = {
        pid: 1 if load_prompt(pid).kind == "choice" else load_prompt(pid).sampling["max_tokens"]
        for pid in prompt_ids(m.estimator, m.layout)
    }
    for prompt_id, variables in requests(plan, s.question, s.texts, m):
        text = load_prompt(prompt_id).render(variables).plain_text()
        if checked < 3 or check.random() < 0.002:
            checked += 1
            if tokenize(text) != [t for seg in segments(text) for t in cache.tokens(seg)]:
                raise AssertionError(f"segment-wise tokenization differs for a {prompt_id} prompt")
        for _ in range(m.repeats):
            n, work = cache.add(text)
            n_requests += 1
            prompt_tokens += n
            computed += work
            generated += budget[prompt_id]
    return {
        "requests": n_requests,
        "prompt_tokens": prompt_tokens,
        "computed_prompt_tokens": computed,
        "generated_tokens": generated,
        "tokenization_checked": checked,
    }


def cil_agreement(s: Scenario) -> float:
    """Max |CIL_naive − CIL_ours| under the stand-in: the naive method normalizes each article's
    own joint table, ours the one shared table of the bin."""
    plan = plan_question(s.name, s.resolution_date, s.articles, s.w, s.k_max)
    joint = {t.key: _unit("j", t.window_ids, t.bits) for t in plan.joints}
    cond = {t.key: _unit("c", t.article_id, t.x, t.window_ids, t.bits) for t in plan.conditionals}
    ours = {r["article_id"]: r["cil"] for r in assemble(plan, s.answer, joint, cond)[0]}
    own: dict[str, dict[str, float]] = {}
    for article_id, t in naive_joint_terms(plan):
        own.setdefault(article_id, {})[t.bits] = _unit("j", t.window_ids, t.bits)
    worst = 0.0
    for article_id in ours:
        pi, _ = normalize_joint(own.get(article_id, {"": 1.0}))
        c1 = {bits: cond[(article_id, 1, bits)] for bits in pi}
        c0 = {bits: cond[(article_id, 0, bits)] for bits in pi}
        worst = max(worst, abs(cil_terms(pi, c1, c0, s.answer).cil - ours[article_id]))
    return worst


def worked_examples(words: int) -> list[Scenario]:
    out = []
    for name, counts in (("uniform 100/50", UNIFORM), ("surge", SURGE)):
        arts = example_articles(counts)
        out.append(Scenario(name, QUESTION, RESOLUTION_DATE, 1, arts, example_texts(arts, words), 3, 10))
    return out


def demo_scenarios(root: str) -> list[Scenario]:
    """The questions of a finished ``pipelines.prophet`` run, with its evidence and settings."""
    base = Layout(root).benchmark("prophet")
    config = storage.read_json(storage.join(base, "dataset_card.json"))["config"]
    questions = {q["question_id"]: q for q in storage.read_table(storage.join(base, "questions")).to_pylist()}
    evidence = storage.read_table(storage.join(base, "evidence")).to_pylist()
    from udfs.schemas import ARTICLES

    corpus = {
        a["article_id"]: a for a in ARTICLES.read(root, columns=["article_id", "title", "text"]).to_pylist()
    }
    by_question: dict[str, list[dict]] = {}
    for e in evidence:
        by_question.setdefault(e["question_id"], []).append(e)
    out = []
    for qid, rows in sorted(by_question.items()):
        q = questions[qid]
        texts = {
            e["article_id"]: PromptArticle(
                e["published_at"].date().isoformat(),
                snippet(
                    corpus[e["article_id"]]["title"], corpus[e["article_id"]]["text"], config["cil_words"]
                ),
            )
            for e in rows
        }
        arts = [EvidenceArticle(e["article_id"], e["published_at"], e["rating"]) for e in rows]
        out.append(
            Scenario(
                f"demo {qid[:24]}",
                q["question"],
                q["resolution_date"],
                q["answer"],
                arts,
                texts,
                config["w"],
                config["k_max"],
            )
        )
    return out


def ratios(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    naive = rows["naive"]
    keys = ("requests", "computed_prompt_tokens", "generated_tokens")
    return {m: {k: naive[k] / rows[m][k] for k in keys if rows[m][k]} for m in rows if m != "naive"}


def report(results: list[dict[str, Any]]) -> str:
    header = f"{'scenario':<34}{'method':<17}{'requests':>10}{'prompt tok':>14}{'computed tok':>14}{'generated':>12}{'naive/ours: req, comp, gen':>30}"
    lines = [header, "-" * len(header)]
    for r in results:
        for name, fig in r["methods"].items():
            ratio = r["ratios"].get(name)
            shown = (
                f"{ratio['requests']:.1f}x {ratio['computed_prompt_tokens']:.1f}x {ratio['generated_tokens']:.1f}x"
                if ratio
                else ""
            )
            lines.append(
                f"{r['scenario'][:33]:<34}{name:<17}{fig['requests']:>10,}{fig['prompt_tokens']:>14,}"
                f"{fig['computed_prompt_tokens']:>14,}{fig['generated_tokens']:>12,}{shown:>30}"
            )
        lines.append(f"{'':<34}max |CIL naive − CIL ours| = {r['cil_max_abs_diff']:.1e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--demo-root", help="root of a finished pipelines.prophet run (adds its questions)")
    parser.add_argument("--words", type=int, default=60, help="words per article in the worked examples")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from pipelines.llm.local_model import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_dir()))

    def full(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    scenarios = worked_examples(args.words) + (demo_scenarios(args.demo_root) if args.demo_root else [])
    results = []
    for s in scenarios:
        started = time.time()
        figures = {m.name: measure(s, m, full, random.Random(0)) for m in METHODS}
        results.append(
            {
                "scenario": s.name,
                "articles": len(s.articles),
                "w": s.w,
                "k_max": s.k_max,
                "methods": figures,
                "ratios": ratios(figures),
                "cil_max_abs_diff": cil_agreement(s),
                "seconds": round(time.time() - started, 1),
            }
        )
        print(report(results[-1:]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print("\n" + report(results))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
