"""The http backend end to end against a separate OpenAI-compatible server process, and the
vLLM processor configuration (built and validated; vLLM itself is a GPU extra)."""

import json
import math
import subprocess
import sys
import time

import pyarrow as pa
import pytest
import requests

from pipelines.llm import backends, placement, serve_engine
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line
from udfs.llm_rows import GENERATE, RESPONSE_SCHEMA, SCORE

CAPITAL = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA)
CHOICE = LLMStage("is_country", "smoke.is_country")
NAMES = pa.table({"name": ["Japan", "Lima"]})


@pytest.fixture(scope="module")
def local_server(local_model_dir):
    """``python -m pipelines.llm.serve_local`` in its own process, on a free port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.llm.serve_local",
            "--port",
            str(port),
            "--model-dir",
            str(local_model_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stdout.read()}")
        try:
            if requests.get(url + "/health", timeout=1).ok:
                break
        except requests.ConnectionError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.llm
@pytest.mark.ray
def test_http_backend_end_to_end_matches_local(ray_local, local_server, local_model_dir, tmp_path):
    http = LLMConfig(
        backend="http", url=local_server, model="gemma-3-270m", tokenizer=str(local_model_dir), batch_size=4
    )
    local = LLMConfig(batch_size=4)
    via_http = StageRunner(str(tmp_path / "http"), "t", http)
    via_local = StageRunner(str(tmp_path / "local"), "t", local)
    countries = pa.table({"country": ["France", "Japan", "France"]})
    gen_http, gen_local = via_http.run(CAPITAL, countries), via_local.run(CAPITAL, countries)
    assert gen_http.column("raw_text").to_pylist() == gen_local.column("raw_text").to_pylist()
    assert (
        all(gen_http.column("parse_ok").to_pylist()) and gen_http.column("backend").to_pylist()[0] == "http"
    )
    assert via_http.summaries[-1].metrics["requests_computed"] == 2
    ch_http, ch_local = via_http.run(CHOICE, NAMES), via_local.run(CHOICE, NAMES)
    for a, b in zip(ch_http.to_pylist(), ch_local.to_pylist(), strict=True):
        assert math.isclose(sum(a["option_probs"]), 1.0)
        # the server returns only the top log-probabilities, so rare surface variants
        # (" YES", "no") the local engine adds to an option's mass can be missing over HTTP
        assert a["option_probs"] == pytest.approx(b["option_probs"], abs=0.02)
        assert a["raw_text"] == b["raw_text"]
    bad = requests.post(
        local_server + "/v1/completions", json={"prompt": "x", "max_tokens": 3, "logprobs": 5}, timeout=30
    )
    assert bad.status_code == 400 and "max_tokens=1" in bad.json()["error"]["message"]


def test_vllm_deployment_settings_for_a_70b_cluster():
    cfg = LLMConfig(
        backend="vllm",
        model="meta-llama/Meta-Llama-3-70B-Instruct",
        tensor_parallel_size=4,
        concurrency=2,
        max_model_len=8192,
        accelerator_type="H100",
        placement_group_config={"bundles": [{"GPU": 1, "CPU": 2}] * 4, "strategy": "STRICT_PACK"},
    )
    settings = serve_engine.deployment_settings(cfg)
    assert settings["model_loading_config"] == {"model_id": cfg.model, "model_source": cfg.model}
    assert settings["deployment_config"] == {"num_replicas": 2}  # fixed: the engines load once
    assert settings["engine_kwargs"]["tensor_parallel_size"] == 4
    assert settings["engine_kwargs"]["enable_prefix_caching"] is True
    assert settings["engine_kwargs"]["max_model_len"] == 8192
    assert (
        settings["accelerator_type"] == "H100"
        and settings["placement_group_config"]["strategy"] == "STRICT_PACK"
    )
    bundles = serve_engine.serve_bundles(cfg)
    assert bundles[0]["CPU"] == 3.0 and bundles[1]["CPU"] == 2.0  # the replica actor's CPU in the first
    assert all(b["accelerator_type:H100"] > 0 for b in bundles)


@pytest.mark.ray
def test_vllm_backend_fails_naming_the_gpus_a_cpu_cluster_lacks(ray_local):
    """Ray itself would wait for ever for the GPUs; the backend waits ``schedule_timeout_s``."""
    import ray

    cfg = LLMConfig(
        backend="vllm",
        model="m",
        tensor_parallel_size=2,
        concurrency=3,
        schedule_timeout_s=1.5,
        placement_group_config={"bundles": [{"GPU": 1}, {"GPU": 1}]},
    )
    started = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        backends.apply_backend(ray.data.from_items([{"prompt_text": "x"}]), cfg, then=(dict, {}))
    assert time.monotonic() - started >= 1.5
    message = str(failed.value)
    assert "3 replica(s) of {CPU: 1, GPU: 2}" in message and "{CPU: 3, GPU: 6} in all" in message
    assert "GPU: 0}" in message and "\n" not in message

    # bundles the local cluster holds: no wait, whatever the timeout
    cpu_only = cfg.replace(placement_group_config={"bundles": [{"CPU": 1}]}, schedule_timeout_s=60)
    started = time.monotonic()
    placement.wait_for_replicas(serve_engine.serve_bundles(cpu_only), 1, cpu_only.schedule_timeout_s)
    assert time.monotonic() - started < 5


def test_serve_requests_and_responses():
    cfg = LLMConfig(backend="vllm", model="m")
    score = {
        "request_key": "k1",
        "prompt_text": "Q? Answer:",
        "mode": SCORE,
        "score_token_ids": [11, 22],
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 1,
        "seed": 0,
        "stop": [],
        "structured": None,
    }
    req = backends.serve_request(score, cfg)
    assert (
        req["method"] == "completions" and req["dtype"] == "CompletionRequest" and req["request_key"] == "k1"
    )
    kwargs = json.loads(req["request_kwargs"]["body"])  # JSON: Ray Data would hand over numpy arrays
    assert (
        kwargs["prompt"] == "Q? Answer:"
        and kwargs["max_tokens"] == 1
        and kwargs["logprob_token_ids"] == [11, 22]
    )
    body = {
        "choices": [{"text": "x", "logprobs": {"top_logprobs": [{"token_id:11": -0.5, "token_id:7": -1.0}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 4},
    }
    out = backends.completion_response({**score, **body, "time_taken": 0.2, "__inference_error__": ""}, body)
    assert out["score_logprobs"] == [-0.5, -math.inf] and out["generated_text"] is None
    assert out["input_tokens"] == 5 and out["output_tokens"] == 1  # one generated token on every backend
    assert out["engine_error"] is None and out["latency_s"] == 0.2
    gen = {
        **score,
        "mode": GENERATE,
        "max_tokens": 64,
        "temperature": 0.7,
        "seed": 3,
        "stop": ["\n"],
        "structured": '{"choice": ["Yes", "No"]}',
    }
    kwargs = json.loads(backends.serve_request(gen, cfg)["request_kwargs"]["body"])
    assert (
        kwargs["structured_outputs"] == {"choice": ["Yes", "No"]}
        and kwargs["seed"] == 3
        and kwargs["stop"] == ["\n"]
    )
    failed = backends.completion_response({**gen, "__inference_error__": "ValueError: too long"}, {})
    assert failed["engine_error"] == "ValueError: too long" and failed["generated_text"] is None
    refused = backends.completion_response(gen, {"error": {"message": "bad", "code": 400}})
    assert "bad" in refused["engine_error"] and refused["generated_text"] is None
    kept_stop = backends.completion_response(gen, {"choices": [{"text": "Paris\nand more"}]})
    assert kept_stop["generated_text"] == "Paris"  # same text as the other backends give


def test_a_row_that_failed_in_ray_data_llm_is_an_engine_error():
    """ray.data.llm passes a failed row on without postprocessing it: its error is in
    ``__inference_error__`` (empty for the rows that went through)."""
    batch = pa.table(
        {
            "request_key": ["ok", "bad"],
            "generated_text": ["Paris", None],
            "engine_error": [None, None],
            "__inference_error__": ["", "ValidationError: 1 validation error"],
        }
    )
    table = backends.responses_table(batch)
    assert table.schema == RESPONSE_SCHEMA
    assert table.column("engine_error").to_pylist() == [None, "ValidationError: 1 validation error"]
    assert backends.responses_table(batch.drop_columns(["engine_error"])).column(
        "engine_error"
    ).to_pylist() == [
        None,
        "ValidationError: 1 validation error",
    ]


def test_http_processor_config_and_payloads(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = LLMConfig(backend="http", url="http://vllm:8000/", model="llama", qps=5, max_retries=4)
    proc = backends.http_processor_config(cfg)
    assert proc.url == "http://vllm:8000/v1/completions" and proc.qps == 5 and proc.max_retries == 4
    assert proc.headers["Authorization"] == "Bearer sk-test"
    row = {"request_key": "k", "prompt_text": "p", "mode": SCORE, "score_token_ids": [7, 9]}
    payload = backends.completion_payload(row, cfg)
    assert payload["logprobs"] == cfg.top_logprobs and payload["return_tokens_as_token_ids"] is True
    assert payload["logprob_token_ids"] == [7, 9]  # vLLM returns exactly these; other servers ignore it
    body = {
        "choices": [{"text": "x", "logprobs": {"top_logprobs": [{"token_id:9": -1.0}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    resp = backends.completion_response({**row, "http_response": body}, body)
    assert resp["score_logprobs"] == [-math.inf, -1.0] and resp["input_tokens"] == 3
    err = backends.completion_response(row, {"error": {"message": "bad"}})
    assert "bad" in err["engine_error"]
