"""A small OpenAI-compatible server over the local engine (``/v1/completions``, ``/v1/models``).

    python -m pipelines.llm.serve_local --port 8000 [--model-dir DIR]

It lets the ``http`` backend run end to end on a laptop and in the tests, with the same wire
format as ``vllm serve``: ``logprobs`` with ``max_tokens=1`` returns the top next-token
log-probabilities, keyed ``token_id:<id>`` when ``return_tokens_as_token_ids`` is set (as vLLM
does). Requests are answered one at a time; it is a development server, not a production one.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pyarrow as pa

from pipelines.llm.local_engine import LocalEngine
from udfs.llm_rows import GENERATE, REQUEST_SCHEMA

log = logging.getLogger("augury.llm.serve")


class CompletionError(ValueError):
    """A request the server cannot answer (reported as HTTP 400 with an OpenAI error body)."""


def complete(engine: LocalEngine, body: dict[str, Any], model_name: str) -> dict[str, Any]:
    """Answer one ``/v1/completions`` request body."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise CompletionError("'prompt' must be a single string")
    max_tokens = int(body.get("max_tokens", 16))
    top_k = body.get("logprobs")
    choice: dict[str, Any] = {"index": 0, "logprobs": None}
    if top_k:
        if max_tokens != 1:
            raise CompletionError("this server returns log-probabilities for max_tokens=1 only")
        top = engine.top_logprobs(prompt, int(top_k))
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        key = (lambda t: f"token_id:{t}") if as_ids else (lambda t: engine.tokenizer.decode([t]))
        first = top[0][0]
        choice.update(
            text=engine.tokenizer.decode([first]),
            logprobs={
                "tokens": [key(first)],
                "token_logprobs": [top[0][1]],
                "top_logprobs": [{key(t): v for t, v in top}],
            },
            finish_reason="length",
        )
        n_in, n_out = len(engine.tokenizer(prompt)["input_ids"]), 1
    else:
        stop = body.get("stop") or []
        row = {
            "request_key": "http",
            "prompt_text": prompt,
            "mode": GENERATE,
            "temperature": float(body.get("temperature", 1.0)),
            "top_p": float(body.get("top_p", 1.0)),
            "max_tokens": max_tokens,
            "seed": int(body.get("seed") or 0),
            "stop": [stop] if isinstance(stop, str) else list(stop),
            "structured": json.dumps(body["structured_outputs"]) if body.get("structured_outputs") else None,
            "score_token_ids": [],
        }
        out = engine.run(pa.Table.from_pylist([row], schema=REQUEST_SCHEMA)).to_pylist()[0]
        if out["engine_error"]:
            raise CompletionError(out["engine_error"])
        choice.update(
            text=out["generated_text"],
            finish_reason="stop" if out["output_tokens"] < max_tokens else "length",
        )
        n_in, n_out = out["input_tokens"], out["output_tokens"]
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:12]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model_name,
        "choices": [choice],
        "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
    }


def make_handler(engine: LocalEngine, model_name: str) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/health", "/v1/health"):
                self._send(200, {"status": "ok"})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model_name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with lock:
                    self._send(200, complete(engine, body, model_name))
            except (CompletionError, json.JSONDecodeError, TypeError, ValueError) as exc:
                self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})

        def log_message(self, fmt: str, *args: Any) -> None:
            log.debug("%s " + fmt, self.address_string(), *args)

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-dir", help="a plain transformers checkpoint (default: the embedded model)")
    parser.add_argument("--model-name", default="gemma-3-270m", help="the name clients send as 'model'")
    parser.add_argument("--max-input-tokens", type=int, default=2048)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    engine = LocalEngine(model_dir=args.model_dir, max_input_tokens=args.max_input_tokens)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine, args.model_name))
    log.info("serving %s on http://%s:%d/v1", args.model_name, args.host, args.port)
    print(f"READY http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
