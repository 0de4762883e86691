"""What the renderer hands an engine: a declared JSON schema in the prompt's own property order,
under a cache key that does not depend on that order."""

import json

import pyarrow as pa
import pytest

from pipelines.llm import local_model, render, tokenizer
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


def _local(tmp_path, **files: str) -> RenderConfig:
    """A local checkpoint directory holding only the given tokenizer files."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return RenderConfig("local", "m", None, str(tmp_path), True, 64)


def test_a_base_checkpoint_renders_without_loading_its_tokenizer(tmp_path, monkeypatch):
    def no_load(cfg):
        raise AssertionError("the tokenizer was loaded")

    for module in (render, tokenizer):
        monkeypatch.setattr(module, "load_tokenizer", no_load)
    cfg = _local(tmp_path, **{"tokenizer_config.json": '{"model_max_length": 2048}'})
    prompt = load_prompt("daily_oracle.category")
    rendered = prompt.render({"question": "Will it rain in Lyon by May 2026?"})
    assert not tokenizer.has_chat_template(cfg)
    assert render.Tokenizing(cfg).prompt_text(rendered) == rendered.plain_text()


def test_a_template_in_the_config_or_a_template_file_means_a_chat_template(tmp_path, monkeypatch):
    class Tok:
        chat_template = "{{ messages }}"

    loads = []
    monkeypatch.setattr(tokenizer, "load_tokenizer", lambda cfg: loads.append(cfg) or Tok())
    keyed = tmp_path / "keyed"
    keyed.mkdir()
    assert tokenizer.has_chat_template(
        _local(keyed, **{"tokenizer_config.json": '{"chat_template": "{{ x }}"}'})
    )
    assert not loads  # the config says so
    for name in tokenizer.TEMPLATE_FILES[:2]:  # a template file: the tokenizer is asked
        directory = tmp_path / name.replace(".", "_")
        directory.mkdir()
        assert tokenizer.has_chat_template(
            _local(directory, **{name: "{{ x }}", "tokenizer_config.json": "{}"})
        )
    assert len(loads) == 2


def _every_local_setting(checkpoint) -> list[RenderConfig]:
    """The stages' settings one worker may render for a local checkpoint: either backend, with
    and without a chat template and a token limit."""
    return [
        RenderConfig(backend, "m", "m", str(checkpoint), template, limit)
        for backend in ("scripted", "local")
        for template in (True, False)
        for limit in (None, 40)
    ]


def test_a_worker_loads_a_tokenizer_once_whatever_the_stages_other_settings(tmp_path, monkeypatch):
    """Keyed on the whole RenderConfig, a worker that rendered stages of the scripted and the local
    backend, with and without a token limit, loaded the same tokenizer for each (22 loads in 10
    workers where 10 would do, ~3 CPU-seconds each for the embedded model's)."""
    import transformers

    loads = []
    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", lambda source: loads.append(source) or object()
    )

    def missing(source):
        loads.append(source)
        raise OSError(f"no tokenizer at {source}")

    # sources no other test names, so nothing cached before answers for them (and the fakes
    # cached here are never asked for again)
    local = _every_local_setting(tmp_path)
    assert len({id(tokenizer.load_tokenizer(cfg)) for cfg in local}) == 1
    assert loads == [str(tmp_path)]
    resolved = []
    monkeypatch.setattr(local_model, "model_path", lambda model_dir: resolved.append(model_dir) or model_dir)
    assert all(tokenizer.load_tokenizer(cfg) is not None for cfg in local * 3)  # as every token count asks
    assert resolved == []  # each configuration's checkpoint path was resolved once, above
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", missing)
    absent, needed = f"no-tokenizer-{tmp_path.name}", f"no-vllm-tokenizer-{tmp_path.name}"
    http = [RenderConfig("http", "m", absent, None, True, limit) for limit in (None, 40)]
    assert [tokenizer.load_tokenizer(cfg) for cfg in http] == [None, None]  # asked once, remembered
    vllm = RenderConfig("vllm", "m", needed, None, True, None)
    for _ in range(2):  # the vLLM backend needs one: an error every time it is asked
        with pytest.raises(OSError, match=needed):
            tokenizer.load_tokenizer(vllm)
    assert loads == [str(tmp_path), absent, needed, needed]


PLAIN = {"backend": "tokenizers", "tokenizer_class": "GemmaTokenizer", "eos_token": "<eos>"}


def _checkpoint(directory, config: dict | None, tokenizer_json: bool = True, **files: str):
    directory.mkdir()
    if tokenizer_json:
        (directory / "tokenizer.json").write_text("{}")
    if config is not None:
        files["tokenizer_config.json"] = json.dumps(config)
    _local(directory, **files)
    return directory


def test_only_a_plain_tokenizer_json_skips_transformers(tmp_path):
    """A checkpoint whose tokenizer transformers would change (a chat template, added or split
    special tokens, cleaned-up decodings, another class, an older save without ``"backend":
    "tokenizers"``) loads through transformers."""
    cases = {
        "plain": (PLAIN, {}, True),
        "plain_with_false_settings": (
            PLAIN | {"clean_up_tokenization_spaces": False, "split_special_tokens": False},
            {},
            True,
        ),
        "older_save": ({k: v for k, v in PLAIN.items() if k != "backend"}, {}, False),
        "no_config": (None, {}, False),
        "another_class": (PLAIN | {"tokenizer_class": "LlamaTokenizer"}, {}, False),
        "template_key": (PLAIN | {"chat_template": "{{ x }}"}, {}, False),
        "template_file": (PLAIN, {"chat_template.jinja": "{{ x }}"}, False),
        "clean_up": (PLAIN | {"clean_up_tokenization_spaces": True}, {}, False),
        "split_special": (PLAIN | {"split_special_tokens": True}, {}, False),
        "added_tokens": (PLAIN | {"added_tokens_decoder": {"7": {"content": "<x>"}}}, {}, False),
        "bos_insertion": (PLAIN | {"add_bos_token": False}, {}, False),
        "older_special_tokens_file": (PLAIN, {"special_tokens_map.json": "{}"}, False),
        "older_added_tokens_file": (PLAIN, {"added_tokens.json": "{}"}, False),
    }
    for name, (config, files, plain) in cases.items():
        assert tokenizer.is_plain_tokenizer(_checkpoint(tmp_path / name, config, **files)) is plain, name
    assert not tokenizer.is_plain_tokenizer(_checkpoint(tmp_path / "no_tokenizer_json", PLAIN, False))


def test_a_worker_loads_a_plain_tokenizer_once_whatever_the_stages_other_settings(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(tokenizer, "TokenizerFile", lambda path: made.append(path) or object())
    directory = _checkpoint(tmp_path / "plain", PLAIN)
    local = _every_local_setting(directory)
    assert len({id(tokenizer.load_tokenizer(cfg)) for cfg in local}) == 1
    assert made == [str(directory)]


def test_the_engine_reads_a_plain_tokenizer_from_its_file_and_any_other_through_transformers(
    tmp_path, monkeypatch
):
    import transformers
    from tokenizers import Tokenizer, models

    special = {"bos_token": "<bos>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"}
    named = _checkpoint(tmp_path / "named", PLAIN | special | {"model_max_length": 32})
    words = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4, "a": 5}
    for directory in (named, _checkpoint(tmp_path / "eos_only", PLAIN)):
        Tokenizer(models.WordLevel(words, unk_token="<unk>")).save(str(directory / "tokenizer.json"))
    loaded = []
    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", lambda path: loaded.append(path) or "auto"
    )
    engine = tokenizer.engine_tokenizer(str(named))
    assert type(engine) is transformers.PreTrainedTokenizerFast and loaded == []
    ids = (engine.eos_token_id, engine.pad_token_id, engine.mask_token_id)
    assert ids == (1, 0, 4) and engine.model_max_length == 32  # the configuration's tokens and settings
    # a class's defaults would fill the special tokens a configuration leaves out: transformers builds it
    assert tokenizer.engine_tokenizer(str(tmp_path / "eos_only")) == "auto"
    templated = _checkpoint(tmp_path / "templated", PLAIN, **{"chat_template.jinja": "{{ x }}"})
    assert tokenizer.engine_tokenizer(str(templated)) == "auto"
    assert loaded == [str(tmp_path / "eos_only"), str(templated)]
