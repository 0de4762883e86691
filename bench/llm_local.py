"""Local LLM stage vs the naive loop, and constrained vs unconstrained decoding, on the same prompts.

    python -m bench.llm_local [--prompts 48] [--max-tokens 16] [--batch-size 8]

1. The naive loop is what most scripts do: load the model, then call ``generate`` once per
   prompt. The stage runs the same prompts through Ray Data and the batched local engine, with
   duplicate prompts collapsed. Both decode greedily for the same number of new tokens with no
   stop string and no output constraint (so generated tokens/s compares like with like); the
   model load is timed separately (the stage's engine actor is warmed on a throwaway stage first).
2. Structured output on the embedded engine: the same stage unconstrained, with a regex and with a
   JSON schema (xgrammar masks every step; grammars compiled during the warm-up), in generated
   tokens/s. Every run uses a fresh request cache.
3. The LM head's order (``grammar_decode.FewRowsHead``): the engine answers batches of 2, 4 and 8
   greedy free-text requests with its head, then with the model's own ``nn.Linear`` head, on
   the same engine; seconds of each and whether the answers are the same.
4. A shared opening (``shared_prefix``): four TCELongBench key-point prompts (the same ~730
   tokens of rules and examples, four summaries) answered by the engine with the opening
   computed once, then as the plain padded batch a ``generate`` call makes; seconds of each and
   whether the answers are the same.
5. The grammar mask of free text (``grammar_decode.GrammarMask``): four Daily Oracle qa prompts
   under the qa stage's form at the demo's token cap (question wording is free text), answered by
   the engine, whose free-text rows offer the grammar their best token before filling a mask,
   then with the mask filled at every step, as xgrammar's usual logits processor does; seconds
   of each and whether the answers are the same.

Results go to ``bench/results/llm_local.json``; the last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray
from pipelines.llm.render import RenderConfig, Tokenizing
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line

COUNTRIES = [
    "France", "Japan", "Kenya", "Brazil", "Peru", "Canada", "Egypt", "India", "Chile", "Norway",
    "Ghana", "Nepal", "Spain", "Italy", "Mexico", "Turkey", "Poland", "Greece", "Sweden", "Vietnam",
    "Morocco", "Austria", "Cuba", "Iran",
]  # fmt: skip


def naive_loop(prompts: list[str], max_tokens: int, model_dir: str) -> dict[str, float]:
    """One ``generate`` call per prompt, as a plain transformers script would do it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.time()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    load = time.time() - started
    started, generated = time.time(), 0
    for prompt in prompts:
        enc = tokenizer(prompt, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=False)
        generated += out.shape[1] - enc["input_ids"].shape[1]
    seconds = time.time() - started
    return {"load_s": load, "seconds": seconds, "requests": len(prompts), "generated_tokens": generated}


CONSTRAINTS: dict[str, dict] = {
    "unconstrained": {},
    "regex": {"regex": r" [A-Z][^\n]{8,200}"},
    "json": {
        "json": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 200}, "sure": {"type": "boolean"}},
            "required": ["city", "sure"],
            "additionalProperties": False,
        }
    },
}


def stage_run(
    table: pa.Table, max_tokens: int, llm: LLMConfig, constraint: dict | None = None
) -> dict[str, float]:
    stage = LLMStage(
        "bench",
        "smoke.capital",
        parser=None if constraint else first_line,
        parsed_schema=pa.schema([]) if constraint else ANSWER_SCHEMA,
        sampling={"max_tokens": max_tokens, "stop": []},
        structured=constraint if constraint is not None else {},
    )
    with tempfile.TemporaryDirectory() as root:
        warm = StageRunner(root, "warm", llm)
        started = time.time()
        warm.run(stage, table.slice(0, 1))
        load = time.time() - started
        runner = StageRunner(root, "bench", llm)
        started = time.time()
        runner.run(stage, table)
        seconds = time.time() - started
    metrics = runner.summaries[-1].metrics
    return {
        "load_s": load,
        "seconds": seconds,
        "requests": table.num_rows,
        "engine_requests": metrics["requests_computed"],
        "generated_tokens": metrics["output_tokens"],
    }


def head_order(prompts: list[str], max_tokens: int) -> dict[str, dict]:
    """Per batch size: the engine's answer time with its head and with the model's own, after a
    warm-up of each, and whether the two gave the same text."""
    from pipelines.llm.local_engine import LocalEngine
    from udfs.llm_rows import REQUEST_SCHEMA

    engine = LocalEngine()
    ours = engine.model.lm_head
    plain = torch_linear(ours.weight)
    results = {}
    for rows in (2, 4, 8):
        batch = pa.Table.from_pylist(
            [
                {"request_key": str(k), "prompt_text": text, "mode": "generate", "temperature": 0.0}
                | {"top_p": 1.0, "max_tokens": max_tokens, "seed": 0, "stop": None, "structured": None}
                for k, text in enumerate(prompts[:rows])
            ],
            schema=REQUEST_SCHEMA,
        )
        timed = {}
        for name, head in (("plain", plain), ("engine", ours)):
            engine.model.lm_head = head
            engine.run(batch)
            started = time.time()
            answers = engine.run(batch).column("generated_text").to_pylist()
            timed[name] = (time.time() - started, answers)
        engine.model.lm_head = ours
        results[str(rows)] = {
            "engine_s": round(timed["engine"][0], 3),
            "plain_s": round(timed["plain"][0], 3),
            "same_text": timed["engine"][1] == timed["plain"][1],
        }
    return results


def shared_opening(max_tokens: int) -> dict[str, float | bool]:
    """Four key-point prompts that differ after the examples, answered with and without
    ``shared_prefix`` (each after a warm-up)."""
    from pipelines.llm import shared_prefix
    from pipelines.llm.local_engine import LocalEngine
    from udfs.llm_rows import REQUEST_SCHEMA
    from udfs.prompts import load_prompt

    engine = LocalEngine()
    prompt = load_prompt("tcelongbench.key_points")
    texts = [
        prompt.render({"summary": f"{lead} {prompt.example['summary']}"}).plain_text()
        for lead in ("Monday:", "From the wire, late edition:", "Update.", "Reported by a local paper:")
    ]
    batch = pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": "generate", "temperature": 0.0}
            | {"top_p": 1.0, "max_tokens": max_tokens, "seed": 0, "stop": None, "structured": None}
            for k, text in enumerate(texts)
        ],
        schema=REQUEST_SCHEMA,
    )
    timed = {}
    for name, least in (("plain", 10**9), ("shared", shared_prefix.MIN_SHARED)):
        shared_prefix.MIN_SHARED = least
        engine.run(batch)
        started = time.time()
        answers = engine.run(batch).column("generated_text").to_pylist()
        timed[name] = (time.time() - started, answers)
    ids = [engine.tokenizer(t)["input_ids"] for t in texts]
    return {
        "prompt_tokens": sum(len(i) for i in ids),
        "shared_tokens": shared_prefix.shared_length(ids),
        "shared_s": round(timed["shared"][0], 3),
        "plain_s": round(timed["plain"][0], 3),
        "same_text": timed["shared"][1] == timed["plain"][1],
    }


def demo_cap() -> int:
    """Daily Oracle's ``--max-new-tokens`` in the demo (its registry entry): the qa form fitted to
    it has the long bounded repetitions whose masks cost most to fill."""
    from pipelines.builders import registry

    args = registry()["daily_oracle"].demo.args
    return int(args[args.index("--max-new-tokens") + 1])


def free_text_mask(max_tokens: int) -> dict[str, float | bool]:
    """Four qa prompts under the qa form, answered with the engine's mask and with a mask filled
    at every step (each after a warm-up that compiles the form)."""
    from pipelines.daily_oracle.stages import qa_form
    from pipelines.llm import grammar_decode
    from pipelines.llm.local_engine import LocalEngine
    from udfs.llm_rows import REQUEST_SCHEMA
    from udfs.prompts import load_prompt

    engine = LocalEngine()
    prompt = load_prompt("daily_oracle.qa")
    example = prompt.example
    texts = [
        prompt.render(example | {"article": f"{lead} {example['article']}"}).plain_text()
        for lead in ("Monday:", "From the wire, late edition:", "Update.", "Reported by a local paper:")
    ]
    form = qa_form(example["month_year"], max_tokens)
    batch = pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": "generate", "temperature": 0.0}
            | {"top_p": 1.0, "max_tokens": max_tokens, "seed": 0, "stop": None, "structured": form}
            for k, text in enumerate(texts)
        ],
        schema=REQUEST_SCHEMA,
    )
    engine.run(batch.slice(0, 1))  # compiles the form
    timed, checked = {}, grammar_decode.GrammarMask

    def filled_every_step(compiled, rows: int, end_ids: list[int], greedy: bool = False):
        return checked(compiled, rows, end_ids, greedy=False)  # every row's mask before every step

    for name, mask in (("filled", filled_every_step), ("checked", checked)):
        grammar_decode.GrammarMask = mask
        try:
            started = time.time()
            out = engine.run(batch)
            timed[name] = (time.time() - started, out.column("generated_text").to_pylist())
        finally:
            grammar_decode.GrammarMask = checked
    return {
        "generated_tokens": sum(out.column("output_tokens").to_pylist()),
        "checked_s": round(timed["checked"][0], 3),
        "filled_s": round(timed["filled"][0], 3),
        "same_text": timed["checked"][1] == timed["filled"][1],
    }


def torch_linear(weight):
    """The model's own kind of head over ``weight`` (shared, bias-free)."""
    import torch

    # on the meta device: no 671 MB weight of its own before ``weight`` replaces it
    head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
    head.weight = weight
    return head


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=48, help="number of requests (countries repeat)")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)

    from pipelines.llm.local_model import embedded_model_dir

    llm = LLMConfig(batch_size=args.batch_size, shard_size=64)
    ensure_ray(llm)
    countries = [COUNTRIES[i % len(COUNTRIES)] for i in range(args.prompts)]
    table = pa.table({"country": countries})
    renderer = Tokenizing(RenderConfig.of(llm))
    prompt = LLMStage("r", "smoke.capital").prompt
    prompts = [renderer.prompt_text(prompt.render({"country": c})) for c in countries]

    ours = stage_run(table, args.max_tokens, llm)
    naive = naive_loop(prompts, args.max_tokens, str(embedded_model_dir()))
    constrained = {name: stage_run(table, args.max_tokens, llm, c) for name, c in CONSTRAINTS.items()}
    heads = head_order(prompts, 3 * args.max_tokens)
    opening = shared_opening(args.max_tokens)
    cap = demo_cap()
    masks = free_text_mask(cap)
    rows = []
    for name, r in (("naive loop", naive), ("augury stage", ours)):
        rows.append(
            (
                name,
                r["requests"] / r["seconds"],
                r["generated_tokens"] / r["seconds"],
                r["seconds"],
                r["load_s"],
            )
        )
    print(
        f"\n{args.prompts} requests ({len(set(countries))} distinct), greedy, {args.max_tokens} new tokens, no stop string"
    )
    print(f"{'':<14}{'req/s':>9}{'gen tok/s':>11}{'seconds':>10}{'load s':>9}")
    for name, rps, tps, sec, load in rows:
        print(f"{name:<14}{rps:>9.2f}{tps:>11.1f}{sec:>10.1f}{load:>9.1f}")
    ratio = (ours["requests"] / ours["seconds"]) / (naive["requests"] / naive["seconds"])
    print(f"requests/s ratio (stage / naive): {ratio:.2f}x")
    print(f"\nstructured output on the embedded engine, {args.max_tokens} new tokens at most")
    print(f"{'':<14}{'gen tok/s':>11}{'tokens':>8}{'seconds':>10}")
    speed = {name: r["generated_tokens"] / r["seconds"] for name, r in constrained.items()}
    for name, r in constrained.items():
        print(f"{name:<14}{speed[name]:>11.1f}{r['generated_tokens']:>8}{r['seconds']:>10.1f}")
    print(f"\nthe engine's LM head against the model's own, greedy, {3 * args.max_tokens} new tokens")
    print(f"{'rows':<6}{'engine s':>10}{'plain s':>9}{'ratio':>7}  same text")
    for rows, h in heads.items():
        print(
            f"{rows:<6}{h['engine_s']:>10.2f}{h['plain_s']:>9.2f}{h['plain_s'] / h['engine_s']:>7.2f}  {h['same_text']}"
        )
    print(
        f"\nfour TCELongBench key-point prompts ({opening['prompt_tokens']} tokens, {opening['shared_tokens']}"
        f" of each shared), greedy, {args.max_tokens} new tokens"
    )
    print(f"{'opening':<9}{'seconds':>9}  same text")
    print(f"{'shared':<9}{opening['shared_s']:>9.2f}  {opening['same_text']}")
    print(f"{'plain':<9}{opening['plain_s']:>9.2f}")
    print(
        f"\nfour Daily Oracle qa prompts under the qa form, greedy, {cap} new tokens at most"
        f" ({masks['generated_tokens']} generated)"
    )
    print(f"{'mask':<9}{'seconds':>9}  same text")
    print(f"{'checked':<9}{masks['checked_s']:>9.2f}  {masks['same_text']}")
    print(f"{'filled':<9}{masks['filled_s']:>9.2f}")
    summary = {
        "stage_vs_naive_requests_per_s": round(ratio, 3),
        "head_plain_vs_engine_4_rows": round(heads["4"]["plain_s"] / heads["4"]["engine_s"], 3),
        "shared_opening_plain_vs_shared": round(opening["plain_s"] / opening["shared_s"], 3),
        "free_text_mask_filled_vs_checked": round(masks["filled_s"] / masks["checked_s"], 3),
        "unconstrained_tok_s": round(speed["unconstrained"], 2),
        "regex_tok_s": round(speed["regex"], 2),
        "json_tok_s": round(speed["json"], 2),
        "regex_vs_unconstrained": round(speed["regex"] / speed["unconstrained"], 3),
        "json_vs_unconstrained": round(speed["json"] / speed["unconstrained"], 3),
    }
    out = Path("bench/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "llm_local.json").write_text(
        json.dumps(
            {"naive": naive, "stage": ours, "structured": constrained, "heads": heads}
            | {"opening": opening, "masks": masks, **summary},
            indent=2,
        )
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
