"""What the renderer hands an engine: a declared JSON schema in the prompt's own property order,
under a cache key that does not depend on that order."""

import json

import pyarrow as pa

from pipelines.llm.backends import completion_payload
from pipelines.llm.config import LLMConfig
from pipelines.llm.render import ROW, RenderConfig, RequestRenderer
from pipelines.llm.stage import LLMStage
from udfs.prompts import load_prompt

LLM = LLMConfig(backend="http", model="m", tokenizer="no-such-tokenizer", chat_template=False)


def _request(structured: dict) -> dict:
    stage = LLMStage("struct", "openforecast.event_struct", structured=structured)
    renderer = RequestRenderer(RenderConfig.of(LLM), stage, stage.prompt)
    units = renderer(pa.table({"event": ["2026-03-03: a strike in Lyon."], ROW: pa.array([0], pa.int64())}))
    (request,) = units.column("__requests").to_pylist()[0]
    return request


def _properties(form: dict) -> list[str]:
    return list(form["json"]["items"]["properties"])


def test_the_engine_gets_the_declared_property_order_and_the_cache_key_ignores_it():
    declared = load_prompt("openforecast.event_struct").output
    reordered = json.loads(json.dumps(declared))
    items = reordered["json"]["items"]
    items["properties"] = dict(reversed(items["properties"].items()))
    assert _properties(declared)[:3] == ["type", "trigger", "time"] and _properties(reordered)[0] == "extra"

    for form in (declared, reordered):
        request = _request(form)
        assert _properties(json.loads(request["structured"])) == _properties(form)
        sent = completion_payload(request, LLM)["structured_outputs"]  # the http and vLLM body
        assert _properties(sent) == _properties(form)
    assert _request(declared)["request_key"] == _request(reordered)["request_key"]
