"""The model's tokenizer as rendering needs it: the chat template, choice plans' token ids, token
estimates. Loaded once per worker process and source, lazily: a base model's generate stage needs
none, and a plain local checkpoint (the embedded model's) loads through the tokenizers library
without importing transformers or torch. Also the local engine's tokenizer (``engine_tokenizer``),
read from the same file when it is plain."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.llm.render import RenderConfig

log = logging.getLogger("augury.llm.stage")


@functools.lru_cache(maxsize=16)
def load_tokenizer(cfg: RenderConfig) -> Any:
    """The model's tokenizer (chat template, choice token ids, token estimates), or None for an
    http model whose tokenizer cannot be loaded. Cached by configuration too, so that every token
    count does not resolve the checkpoint's path again (file checks)."""
    if cfg.backend in ("local", "scripted"):
        from pipelines.llm.local_model import model_path

        path = model_path(cfg.model_dir)
        if is_plain_tokenizer(Path(path)):
            return tokenizer_file(path)
        return tokenizer_from(path, required=True)
    return tokenizer_from(cfg.tokenizer_source, required=cfg.backend == "vllm")


@functools.lru_cache(maxsize=4)
def tokenizer_from(source: str, required: bool) -> Any:
    """The tokenizer at ``source``, loaded once per process whatever the stage's other settings:
    a worker renders stages of several configurations (the scripted and local backends, their
    token limits) and each load costs ~3.8 CPU-seconds for the embedded model's 262k tokens. A
    missing tokenizer is None unless ``required``, and that answer is cached too."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        if required:
            raise
        log.warning("no tokenizer at %s (%s): plain prompts, no choice requests", source, exc)
        return None


TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "additional_chat_templates")
# Files of older saves that transformers still reads for special and added tokens
LEGACY_FILES = ("special_tokens_map.json", "added_tokens.json")


def _tokenizer_config(path: Path) -> dict[str, Any] | None:
    config = path / "tokenizer_config.json"
    return json.loads(config.read_text()) if config.exists() else None


# A plain tokenizer's configuration: transformers' save of a checkpoint whose tokenizer.json is the
# whole tokenizer. Any other key (added tokens, special-token splitting, prefix spaces, a template,
# bos/eos insertion) is something transformers adds on top of the file, so such a checkpoint goes
# through transformers.
PLAIN_CONFIG_KEYS = {
    "backend",
    "tokenizer_class",
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "mask_token",
    "model_max_length",
    "padding_side",
    "is_local",
    "local_files_only",
}
PLAIN_IF_FALSE = {"clean_up_tokenization_spaces", "split_special_tokens"}
# Classes whose transformers tokenizer encodes and decodes as their tokenizer.json, as checked
# against the embedded model's (tests/pipelines/test_render_tokenizer.py): Gemma's.
PLAIN_CLASSES = ("GemmaTokenizer",)


def is_plain_tokenizer(path: Path) -> bool:
    """Whether a local checkpoint's tokenizer is its ``tokenizer.json`` alone: saved by
    transformers for the tokenizers library, of a class that adds nothing to the file, and a
    configuration of ``PLAIN_CONFIG_KEYS`` only (a false ``PLAIN_IF_FALSE`` setting aside), so no
    chat template either, nor the special or added tokens of an older save's files. Such a
    tokenizer encodes and decodes through the tokenizers library as transformers' does
    (``tokenizer_file``)."""
    return _plain_config(path) is not None


def _plain_config(path: Path) -> dict[str, Any] | None:
    """The configuration of a plain tokenizer (``is_plain_tokenizer``), None for any other."""
    config = _tokenizer_config(path)
    plain = (
        (path / "tokenizer.json").exists()
        and config is not None
        and config.get("backend") == "tokenizers"
        and config.get("tokenizer_class") in PLAIN_CLASSES
        and all(
            key in PLAIN_CONFIG_KEYS or (key in PLAIN_IF_FALSE and not value) for key, value in config.items()
        )
        and not any((path / name).exists() for name in TEMPLATE_FILES + LEGACY_FILES)
    )
    return config if plain else None


class TokenizerFile:
    """A plain tokenizer (``is_plain_tokenizer``) through the tokenizers library, with the calls
    rendering makes of transformers' tokenizer. A worker that renders for the embedded model then
    imports neither transformers nor torch: ~3.5 of its ~4.6 CPU-seconds for the tokenizer."""

    chat_template = None

    def __init__(self, path: str):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids}

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


# What a plain configuration tells transformers beyond its tokenizer.json (PLAIN_CONFIG_KEYS less
# the keys that name how the configuration was saved), and the special tokens it must name: a
# class such as Gemma's has defaults for those the configuration leaves out, the file has none
PLAIN_SETTINGS = PLAIN_CONFIG_KEYS - {"backend", "tokenizer_class", "is_local", "local_files_only"}
SPECIAL_TOKENS = {"bos_token", "eos_token", "unk_token", "pad_token", "mask_token"}


def engine_tokenizer(path: str) -> Any:
    """The transformers tokenizer of the local checkpoint at ``path``, as the engine encodes,
    decodes and builds grammars with it. A plain one (``is_plain_tokenizer``) whose configuration
    names every special token is read from its ``tokenizer.json`` with those settings: the
    tokenizer ``AutoTokenizer`` builds (its serialisation, special and added tokens, settings, and
    xgrammar's view of its vocabulary are checked equal in tests/pipelines/test_render_tokenizer.py;
    only the padding side differs, which the engine sets) in ~1 of the ~3.8 CPU-seconds
    ``AutoTokenizer`` takes, which for Gemma parses the file in Python and builds it again."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = Path(path)
    config = _plain_config(folder)
    if config is None or SPECIAL_TOKENS - config.keys():  # a special token left to the class
        return AutoTokenizer.from_pretrained(path)
    settings = {k: v for k, v in config.items() if k in PLAIN_SETTINGS}
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **settings)


@functools.lru_cache(maxsize=4)
def tokenizer_file(path: str) -> TokenizerFile:
    """The plain tokenizer at ``path``, loaded once per process (as ``tokenizer_from``)."""
    return TokenizerFile(path)


@functools.lru_cache(maxsize=4)
def has_chat_template(cfg: RenderConfig) -> bool:
    """Whether the model's tokenizer has a chat template. A local checkpoint's files tell without
    loading it (no template file and no ``chat_template`` in ``tokenizer_config.json``: none), so
    a generate stage of a base model renders in a fresh worker without the tokenizer, about 5 s
    of its CPU (transformers' import, the 262k-token vocabulary); otherwise the tokenizer says."""
    if cfg.backend in ("local", "scripted"):
        from pipelines.llm.local_model import model_path

        path = Path(model_path(cfg.model_dir))
        if not any((path / name).exists() for name in TEMPLATE_FILES):
            return bool((_tokenizer_config(path) or {}).get("chat_template"))
    tok = load_tokenizer(cfg)
    return bool(getattr(tok, "chat_template", None))
