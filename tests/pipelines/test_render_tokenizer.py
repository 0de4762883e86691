"""The embedded model's tokenizers are its ``tokenizer.json``. The renderer's, through the tokenizers
library, gives the token ids and decodings of the engine's transformers tokenizer, on real text
and on every choice prompt's options (and the evaluation's option labels), in a worker that never
imports transformers or torch. The engine's, read from the file, is the tokenizer transformers'
``AutoTokenizer`` builds: the same serialisation, special and added tokens, and vocabulary as
xgrammar decodes it."""

import json
import subprocess
import sys

import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.render import RenderConfig, Tokenizing
from pipelines.llm.tokenizer import TokenizerFile, engine_tokenizer, is_plain_tokenizer, load_tokenizer
from udfs.choice import plan_choice
from udfs.evaluate.answers import option_labels
from udfs.prompts import all_prompt_ids, load_prompt

pytestmark = pytest.mark.llm

EDGES = [
    "",
    " ",
    " leading space",
    "trailing  ",
    "tabs\tand\n\nnew lines\r\n",
    "Zürich, São Paulo, Kraków — 東京 and Москва 🎉",
    "<start_of_turn>user\nWill it rain?<end_of_turn>",
    "<bos>a<eos>",
    "1,234.5 km² (about 3%)",
]


def _strings(value) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


def _texts(shared_data) -> list[str]:
    """Real text: the reported.ly articles, the WikiTimes events and ForecastBench's questions."""
    lines = (shared_data / "wcep" / "reportedly_articles_2015-09.json").read_text().splitlines()
    texts = _strings([json.loads(line) for line in lines])[:400]
    texts += _strings(json.loads((shared_data / "wcep" / "wikitimes_CEP_2015-09.json").read_text()))[:400]
    questions = json.loads((shared_data / "questions" / "forecastbench_2024-07-21-human.json").read_text())
    texts += _strings(questions)[:400]
    return [t for t in texts if len(t) > 20] + EDGES


@pytest.fixture(scope="module")
def engine_tok(local_model_dir):
    """The engine's tokenizer, loaded as ``LocalEngine`` loads it (the suite's ``engine`` fixture is
    the engine itself)."""
    return engine_tokenizer(str(local_model_dir))


def test_the_engine_tok_read_from_its_file_is_the_one_transformers_builds(local_model_dir, engine_tok):
    # imported here, not at collection: a pytest worker that runs no model test imports no transformers
    import xgrammar as xgr
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    engine, built = engine_tok, AutoTokenizer.from_pretrained(str(local_model_dir))
    assert type(engine) is PreTrainedTokenizerFast and type(built) is not PreTrainedTokenizerFast
    assert engine.backend_tokenizer.to_str() == built.backend_tokenizer.to_str()
    for name in ("bos", "eos", "pad", "unk", "mask"):
        assert getattr(engine, f"{name}_token_id") == getattr(built, f"{name}_token_id"), name
    assert engine.all_special_ids == built.all_special_ids and engine.get_vocab() == built.get_vocab()
    assert str(engine.added_tokens_decoder) == str(built.added_tokens_decoder)
    settings = (
        "model_input_names",
        "clean_up_tokenization_spaces",
        "split_special_tokens",
        "model_max_length",
    )
    settings += ("add_bos_token", "add_eos_token", "chat_template")
    assert {k: getattr(engine, k, None) for k in settings} == {k: getattr(built, k, None) for k in settings}
    assert (engine.padding_side, built.padding_side) == ("right", "left")  # LocalEngine sets left
    # xgrammar's own reading of the vocabulary, which the engine's grammars are compiled against
    infos = [
        xgr.TokenizerInfo.from_huggingface(t, vocab_size=len(built), stop_token_ids=[1])
        for t in (engine, built)
    ]
    assert infos[0].dump_metadata() == infos[1].dump_metadata()
    assert infos[0].decoded_vocab == infos[1].decoded_vocab
    for text in EDGES:
        ids = built(text, add_special_tokens=True)["input_ids"]
        assert engine(text, add_special_tokens=True)["input_ids"] == ids, text
        for skip in (False, True):
            assert engine.decode(ids, skip_special_tokens=skip) == built.decode(ids, skip_special_tokens=skip)


def test_the_embedded_models_render_tokenizer_gives_the_engines_ids_and_plans(
    local_model_dir, shared_data, engine_tok
):
    engine = engine_tok
    cfg = RenderConfig.of(LLMConfig(model_dir=str(local_model_dir)))
    light = load_tokenizer(cfg)
    assert is_plain_tokenizer(local_model_dir) and isinstance(light, TokenizerFile)
    texts = _texts(shared_data)
    assert len(texts) > 500
    for text in texts:
        for special in (False, True):
            ids = engine(text, add_special_tokens=special)["input_ids"]
            assert light(text, add_special_tokens=special)["input_ids"] == ids, (text[:80], special)
        assert light.decode(ids[:7]) == engine.decode(ids[:7]), text[:80]

    def engine_ids(text: str) -> list[int]:
        return engine(text, add_special_tokens=False)["input_ids"]

    prompts = [load_prompt(p) for p in all_prompt_ids()]
    fixed = [list(p.options) for p in prompts if p.kind == "choice" and p.options]
    assert len(fixed) >= 5
    labelled = [option_labels(n) for n in range(2, 11)]  # the evaluation's per-item options
    rendering = Tokenizing(cfg)
    for options in fixed + labelled:
        for space in (False, True):
            plan = plan_choice(options, rendering.tokenize, space)
            assert plan == plan_choice(options, engine_ids, space), options
            for node in plan.nodes:
                if node.prefix_ids:
                    assert light.decode(node.prefix_ids) == engine.decode(node.prefix_ids)


RENDER_IN_A_FRESH_PROCESS = """
import json, sys
import pyarrow as pa
from pipelines.llm.config import LLMConfig
from pipelines.llm.render import ROW, RenderConfig, RequestRenderer
from pipelines.llm.stage import LLMStage

stage = LLMStage("category", "daily_oracle.category")
renderer = RequestRenderer(RenderConfig.of(LLMConfig(model_dir=sys.argv[1])), stage, stage.prompt)
units = renderer(pa.table({"question": ["Will Lyon's tram strike end by May 2026?"], ROW: pa.array([0], pa.int64())}))
requests = units.column("__requests").to_pylist()[0]
heavy = sorted(m for m in ("transformers", "torch") if m in sys.modules)
print(json.dumps({"heavy": heavy, "scores": [r["score_token_ids"] for r in requests]}))
"""


def test_a_fresh_worker_renders_choice_requests_without_transformers_or_torch(local_model_dir):
    """The ~3.5 CPU-seconds a rendering worker saves: the choice plan needs the tokenizer, and the
    process that renders it imports neither transformers nor torch."""
    done = subprocess.run(
        [sys.executable, "-c", RENDER_IN_A_FRESH_PROCESS, str(local_model_dir)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    options = load_prompt("daily_oracle.category").options
    scored = [i for ids in out["scores"] for i in ids]
    assert len(out["scores"]) >= 1 and len(set(scored)) >= len(options) - 1
