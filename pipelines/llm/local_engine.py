"""A CPU engine over a transformers checkpoint, with the same request/response contract as vLLM.

Used as a Ray Data actor stage (the model loads once per actor) and by the local
OpenAI-compatible server. Two request modes:

- ``score``: one forward pass; the log-probabilities of the requested next tokens.
- ``generate``: batched decoding. Sampled rows draw from their own seeded generator inside a
  logits processor, so a row's output depends on its seed only, never on its batch-mates.
  Structured output: a ``choice`` constraint is honoured exactly (the most probable option
  under scoring); a JSON schema or a regex is enforced token by token with xgrammar
  (``grammar_decode.GrammarMask``), the grammar-constrained decoding library vLLM itself uses:
  every step masks the tokens the grammar forbids, and a row whose grammar is complete may only
  end. In a greedy batch, constrained or not, a step computes the float32 logits of a few
  candidate tokens only (those the grammar allows when every row allows few, else those a
  bfloat16 copy of the head cannot rule out: ``grammar_decode.AllowedHead``), with the choice
  the full LM head would make. A batch whose prompts open with the same tokens prefills that
  opening once (``shared_prefix``), as vLLM's prefix cache would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipelines.llm import shared_prefix
from udfs.choice import plan_choice, resolve_choice
from udfs.llm_rows import GENERATE, RESPONSE_SCHEMA, SCORE, cut_at_stop

if TYPE_CHECKING:
    from pipelines.llm.grammar_decode import GrammarMask

log = logging.getLogger("augury.llm.local")


class _RowSampler:
    """Logits processor: rows with temperature > 0 sample with their own generator (top-p), then
    every other token is masked so greedy selection returns the sampled token."""

    def __init__(self, temperatures: list[float], top_ps: list[float], seeds: list[int]):
        import torch

        self.temperatures, self.top_ps = temperatures, top_ps
        self.generators = []
        for seed in seeds:
            g = torch.Generator()
            g.manual_seed(int(seed) & ((1 << 63) - 1))
            self.generators.append(g)

    def __call__(self, input_ids, scores):
        import torch

        for i, temperature in enumerate(self.temperatures):
            if temperature <= 0:
                continue
            probs = torch.softmax(scores[i].float() / temperature, dim=-1)
            if self.top_ps[i] < 1.0:
                sorted_probs, order = torch.sort(probs, descending=True)
                keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < self.top_ps[i]
                filtered = torch.zeros_like(probs)
                filtered[order[keep]] = sorted_probs[keep]
                probs = filtered / filtered.sum()
            token = torch.multinomial(probs, 1, generator=self.generators[i])
            scores[i] = torch.full_like(scores[i], -math.inf)
            scores[i, token] = 0.0
        return scores


class _StopOnStrings:
    """Stopping criterion: a row is done once its generated text contains a stop string. Cheaper
    than transformers' ``stop_strings``, which preprocesses the whole vocabulary per call."""

    def __init__(self, tokenizer, stops: list[str], prompt_len: int):
        self.tokenizer, self.stops, self.prompt_len = tokenizer, stops, prompt_len
        self.window = max(len(s) for s in stops) + 8

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = []
        for row in input_ids[:, self.prompt_len :].tolist():
            tail = self.tokenizer.decode(row[-self.window :], skip_special_tokens=True)
            done.append(any(s in tail for s in self.stops))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class LocalEngine:
    """A transformers model answering batches of requests (``udfs.llm_rows`` contract)."""

    def __init__(
        self, model_dir: str | None = None, max_input_tokens: int = 2048, threads: int | None = None
    ):
        import torch
        from transformers import AutoModelForCausalLM

        from pipelines.llm.local_model import model_path
        from pipelines.llm.tokenizer import engine_tokenizer
        from udfs.report import quiet_model_loading

        # One core stays free for Ray Data and the driver: torch's spinning OpenMP threads slow
        # down by an order of magnitude when they have to share cores.
        torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) - 1))
        path = model_path(model_dir)
        started = time.time()
        quiet_model_loading()
        self.tokenizer = engine_tokenizer(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        self.model.eval()
        if self.model.lm_head.bias is None:  # the faster order for a few rows (grammar_decode)
            from pipelines.llm.grammar_decode import FewRowsHead

            self.model.lm_head = FewRowsHead(self.model.lm_head)
        self.max_input_tokens = max_input_tokens
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self._compiler: Any = None
        self._grammars: dict[str, Any] = {}
        self._screen: Any = None  # grammar_decode.Screen, made at the first greedy batch
        log.info("local engine loaded %s in %.1f s", path, time.time() - started)

    def run(self, batch: pa.Table) -> pa.Table:
        """Answer a batch of requests (``REQUEST_SCHEMA``) with responses (``RESPONSE_SCHEMA``)."""
        rows = batch.to_pylist()
        out: dict[int, dict[str, Any]] = {}
        by_mode: dict[str, list[int]] = defaultdict(list)
        for i, row in enumerate(rows):
            n_tokens = len(self.tokenizer(row["prompt_text"], add_special_tokens=True)["input_ids"])
            if n_tokens > self.max_input_tokens:
                out[i] = _error(
                    row, f"prompt_too_long: {n_tokens} tokens > {self.max_input_tokens}", n_tokens
                )
            else:
                by_mode[row["mode"]].append(i)
        if by_mode.get(SCORE):
            out.update(self._score([rows[i] for i in by_mode[SCORE]], by_mode[SCORE]))
        generate = by_mode.get(GENERATE, [])
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i in generate:
            r = rows[i]
            groups[(r["max_tokens"], tuple(r["stop"] or ()), r["structured"])].append(i)
        for (max_tokens, stop, structured), idx in groups.items():
            group_rows = [rows[i] for i in idx]
            constraint = json.loads(structured) if structured else {}
            if "choice" in constraint:
                out.update(self._structured_choice(group_rows, idx, constraint["choice"]))
            else:
                grammar = self._grammar(structured) if constraint else None
                out.update(self._generate(group_rows, idx, max_tokens, list(stop), grammar))
        return pa.Table.from_pylist([out[i] for i in range(len(rows))], schema=RESPONSE_SCHEMA)

    def _grammar(self, structured: str):
        """The compiled xgrammar grammar of a ``{"json": schema}`` or ``{"regex": ...}``
        constraint, compiled once per engine."""
        if structured not in self._grammars:
            import xgrammar as xgr

            if self._compiler is None:
                info = xgr.TokenizerInfo.from_huggingface(
                    self.tokenizer,
                    vocab_size=self.model.config.vocab_size,
                    stop_token_ids=sorted(self.eos_ids),
                )
                self._compiler = xgr.GrammarCompiler(info)
            constraint = json.loads(structured)
            if "json" in constraint:
                schema = constraint["json"]
                compiled = self._compiler.compile_json_schema(
                    schema if isinstance(schema, str) else json.dumps(schema), any_whitespace=False
                )
            elif "regex" in constraint:
                compiled = self._compiler.compile_regex(constraint["regex"])
            else:
                raise ValueError(f"unsupported structured output {sorted(constraint)}")
            self._grammars[structured] = compiled
        return self._grammars[structured]

    def _inputs(self, texts: list[str]) -> dict[str, Any]:
        """The model's inputs for a batch (``shared_prefix.inputs``: left-padded, with the cache
        of a shared opening when the prompts have one)."""
        ids = [self.tokenizer(t, add_special_tokens=True)["input_ids"] for t in texts]
        return shared_prefix.inputs(self.model, ids, self.tokenizer.pad_token_id)

    def _next_token_logprobs(self, texts: list[str]):
        import torch

        enc = self._inputs(texts)
        mask = enc["attention_mask"]
        if "past_key_values" in enc:  # the cache holds the rest: only the last tokens are left
            enc = {
                **enc,
                "input_ids": enc["input_ids"][:, -1:],
                "position_ids": mask.sum(dim=1, keepdim=True) - 1,
            }
        with torch.no_grad():
            # Only the last position's logits: the LM head over a 262k vocabulary at every
            # position would cost as much as the rest of the forward pass.
            logits = self.model(**enc, logits_to_keep=1).logits[:, -1, :]
        return torch.log_softmax(logits.float(), dim=-1), mask.sum(dim=1).tolist()

    def _score(self, rows: list[dict], idx: list[int]) -> dict[int, dict]:
        started = time.time()
        logprobs, lengths = self._next_token_logprobs([r["prompt_text"] for r in rows])
        share = (time.time() - started) / len(rows)
        result = {}
        for k, (i, row) in enumerate(zip(idx, rows, strict=True)):
            ids = [int(t) for t in row["score_token_ids"] or []]
            vocab = logprobs.shape[-1]
            values = [float(logprobs[k, t]) if 0 <= t < vocab else -math.inf for t in ids]
            result[i] = _response(row, None, values, lengths[k], 1, share)  # one token, as on vLLM
        return result

    def top_logprobs(self, text: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` most probable next tokens and their log-probabilities (for the HTTP server)."""
        import torch

        logprobs, _ = self._next_token_logprobs([text])
        values, ids = torch.topk(logprobs[0], k)
        return [(int(i), float(v)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)]

    def _structured_choice(self, rows: list[dict], idx: list[int], options: list[str]) -> dict[int, dict]:
        """Honour a choice constraint exactly: score the options, answer with the most probable."""
        started = time.time()
        result = {}
        for i, row in zip(idx, rows, strict=True):
            text = row["prompt_text"]
            plan = plan_choice(options, self._tokenize_plain, text[-1:].isspace())
            prompts = [text + self.tokenizer.decode(node.prefix_ids) for node in plan.nodes]
            node_lps = []
            length = 0
            if prompts:
                logprobs, lengths = self._next_token_logprobs(prompts)
                node_lps = [
                    [float(logprobs[k, t]) for t in node.token_ids] for k, node in enumerate(plan.nodes)
                ]
                length = lengths[0]
            probs, _ = resolve_choice(plan, node_lps)
            best = max(range(len(options)), key=lambda j: (probs[j], -j))
            n_out = len(self._tokenize_plain(options[best]))
            result[i] = _response(row, options[best], None, length, n_out, 0.0)
        share = (time.time() - started) / len(rows)
        for r in result.values():
            r["latency_s"] = share
        return result

    def _tokenize_plain(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    @contextlib.contextmanager
    def _decoding(self, mask: GrammarMask | None, greedy: bool) -> Iterator[None]:
        """While a batch decodes: the grammar mask (if any) advances before each forward pass, and
        in a greedy batch (no processor of the model's own changing logit values) the LM head is an
        ``AllowedHead``, with the engine's bfloat16 screen where the CPU has bfloat16 products."""
        from pipelines.llm import grammar_decode

        hook = (
            self.model.register_forward_pre_hook(mask.advance, with_kwargs=True) if mask is not None else None
        )
        head = self.model.lm_head
        if greedy and head.bias is None:
            if self._screen is None and grammar_decode.Screen.available():
                self._screen = grammar_decode.Screen(head.weight.detach())
            if mask is not None or self._screen is not None:
                self.model.lm_head = grammar_decode.AllowedHead(head, mask, self._screen)
        try:
            yield
        finally:
            if hook is not None:
                hook.remove()
            self.model.lm_head = head

    def _generate(
        self, rows: list[dict], idx: list[int], max_tokens: int, stop: list[str], grammar: Any = None
    ) -> dict[int, dict]:
        import torch

        from pipelines.llm import grammar_decode

        started = time.time()
        enc = self._inputs([r["prompt_text"] for r in rows])
        temperatures = [float(r["temperature"] or 0.0) for r in rows]
        greedy = not any(t > 0 for t in temperatures) and grammar_decode.plain_greedy(
            self.model.generation_config
        )
        processors: list[Any] = []
        mask = None
        if grammar is not None:  # the mask comes first: sampled rows draw from allowed tokens only
            mask = grammar_decode.GrammarMask(grammar, len(rows), sorted(self.eos_ids), greedy)
            processors.append(mask)
        processors.append(
            _RowSampler(
                temperatures,
                [float(r["top_p"] or 1.0) for r in rows],
                [int(r["seed"] or 0) for r in rows],
            )
        )
        kwargs: dict[str, Any] = {}
        if stop:
            kwargs["stopping_criteria"] = [_StopOnStrings(self.tokenizer, stop, enc["input_ids"].shape[1])]
        with torch.no_grad(), self._decoding(mask, greedy):
            generated = self.model.generate(
                **enc,
                max_new_tokens=int(max_tokens),
                do_sample=False,
                logits_processor=processors,
                pad_token_id=self.tokenizer.pad_token_id,
                **kwargs,
            )
        share = (time.time() - started) / len(rows)
        prompt_len = enc["input_ids"].shape[1]
        lengths = enc["attention_mask"].sum(dim=1).tolist()
        result = {}
        for k, (i, row) in enumerate(zip(idx, rows, strict=True)):
            kept, end = [], None
            for t in generated[k, prompt_len:].tolist():
                if t in self.eos_ids or t == self.tokenizer.pad_token_id:
                    end = t
                    break
                kept.append(t)
            raw = self.tokenizer.decode(kept, skip_special_tokens=True)
            text = cut_at_stop(raw, stop)
            result[i] = _response(
                row, text, None, lengths[k], _generated_tokens(kept, end, self.eos_ids, raw != text), share
            )
        return result


def _generated_tokens(kept: list[int], end: int | None, eos_ids: set[int], stopped: bool) -> int:
    """Tokens a row generated, counted as vLLM counts them: its text's tokens, plus the
    end-of-sequence token that ended it. The padding after a row that a stop string (or the
    length cap) ended while batch-mates went on is not generated; with a pad token equal to EOS,
    a row a stop string ended has no EOS of its own."""
    return len(kept) + int(end is not None and end in eos_ids and not stopped)


def _response(
    row: dict, text: str | None, logprobs: list[float] | None, n_in: int, n_out: int, latency: float
):
    return {
        "request_key": row["request_key"],
        "generated_text": text,
        "score_logprobs": logprobs,
        "input_tokens": int(n_in),
        "output_tokens": int(n_out),
        "latency_s": float(latency),
        "engine_error": None,
    }


def _error(row: dict, message: str, n_in: int = 0) -> dict:
    return {**_response(row, None, None, n_in, 0, 0.0), "engine_error": message}
