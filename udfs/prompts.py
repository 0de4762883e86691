"""Versioned prompt templates: one YAML file per prompt under ``prompts/<group>/<name>.yaml``.

A prompt file declares its id (``<group>.<name>``, matching its path), an integer version, its
purpose, the variables it takes, the output format it asks for, default sampling parameters, an
optional system text, the user template, an optional ``answer_prefix`` (the start of the
assistant turn, e.g. ``"Answer:"`` so a choice request scores the very next token), for
generate and verbalized prompts the ``output`` the answer must take, as data — ``{json: <JSON
schema>}``, ``{regex: <pattern>}`` or ``{choice: [...]}`` — which engines enforce as structured
output and the stage runner checks (``udfs.llm_parsing.check_output``), and an ``example`` set
of variables used by the golden render tests. Templates are Jinja2 rendered with
StrictUndefined: a missing variable is an error, never an empty string. Undeclared template
variables and declared-but-unused ones are rejected at load time.
"""

from __future__ import annotations

import functools
import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import yaml

PROMPTS_DIR = Path(os.environ.get("AUGURY_PROMPTS_DIR", Path(__file__).resolve().parents[1] / "prompts"))
KINDS = ("generate", "choice", "verbalized")
OUTPUT_KINDS = ("json", "regex", "choice")

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
    autoescape=False,
)


class PromptError(ValueError):
    """A prompt file is malformed or a render is missing variables."""


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt: the chat turns plus the text the assistant turn starts with."""

    prompt_id: str
    prompt_version: int
    system: str | None
    user: str
    answer_prefix: str

    def messages(self) -> list[dict[str, str]]:
        turns = [{"role": "system", "content": self.system}] if self.system else []
        return [*turns, {"role": "user", "content": self.user}]

    def plain_text(self) -> str:
        """The prompt for a model without a chat template (a base model)."""
        body = "\n\n".join(t for t in (self.system, self.user) if t)
        return f"{body}\n{self.answer_prefix}" if self.answer_prefix else body


@dataclass(frozen=True)
class Prompt:
    """One prompt template loaded from its YAML file."""

    id: str
    version: int
    purpose: str
    kind: str
    variables: tuple[str, ...]
    output_format: str
    user_template: str
    system_template: str | None = None
    answer_prefix: str = ""
    options: tuple[str, ...] = ()
    sampling: dict[str, Any] = field(default_factory=dict)
    example: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] | None = None  # {"json": schema} | {"regex": pattern} | {"choice": [...]}

    def render(self, variables: dict[str, Any]) -> Rendered:
        missing = [v for v in self.variables if v not in variables]
        if missing:
            raise PromptError(f"prompt {self.id} v{self.version}: missing variables {missing}")
        try:
            user = _template(self.user_template).render(**variables).strip()
            system = (
                _template(self.system_template).render(**variables).strip() if self.system_template else None
            )
        except jinja2.UndefinedError as exc:
            raise PromptError(f"prompt {self.id} v{self.version}: {exc}") from exc
        return Rendered(self.id, self.version, system, user, self.answer_prefix)


@functools.lru_cache(maxsize=512)
def _template(source: str) -> jinja2.Template:
    """A compiled template, compiled once per source: compiling costs far more than rendering,
    and a stage renders its prompt once per request."""
    return _ENV.from_string(source)


def _template_variables(source: str) -> set[str]:
    return set(jinja2.meta.find_undeclared_variables(_ENV.parse(source)))


def parse_prompt(data: dict[str, Any], expected_id: str | None = None) -> Prompt:
    """Validate a prompt file's content and build the Prompt."""
    required = ("id", "version", "purpose", "kind", "variables", "output_format", "user")
    absent = [k for k in required if k not in data]
    if absent:
        raise PromptError(f"prompt file {expected_id or data.get('id')}: missing keys {absent}")
    unknown = set(data) - {*required, "system", "answer_prefix", "options", "sampling", "example", "output"}
    if unknown:
        raise PromptError(f"prompt {data['id']}: unknown keys {sorted(unknown)}")
    if expected_id and data["id"] != expected_id:
        raise PromptError(f"prompt file for {expected_id} declares id {data['id']!r}")
    if data["kind"] not in KINDS:
        raise PromptError(f"prompt {data['id']}: kind must be one of {KINDS}")
    if not isinstance(data["version"], int) or data["version"] < 1:
        raise PromptError(f"prompt {data['id']}: version must be a positive integer")
    declared = set(data["variables"])
    used = _template_variables(data["user"]) | _template_variables(data.get("system") or "")
    if used - declared:
        raise PromptError(
            f"prompt {data['id']}: template uses undeclared variables {sorted(used - declared)}"
        )
    if declared - used:
        raise PromptError(f"prompt {data['id']}: declared variables never used {sorted(declared - used)}")
    if data["kind"] == "choice" and not data.get("answer_prefix"):
        raise PromptError(f"prompt {data['id']}: a choice prompt needs an answer_prefix to score after")
    if "output" in data:
        _check_output(data["id"], data["kind"], data["output"])
    return Prompt(
        id=data["id"],
        version=data["version"],
        purpose=data["purpose"].strip(),
        kind=data["kind"],
        variables=tuple(data["variables"]),
        output_format=data["output_format"].strip(),
        user_template=data["user"],
        system_template=data.get("system"),
        answer_prefix=data.get("answer_prefix", ""),
        options=tuple(data.get("options", ())),
        sampling=dict(data.get("sampling", {})),
        example=dict(data.get("example", {})),
        output=data.get("output"),
    )


# What Python's re.escape escapes and xgrammar's regex reader does not know as an escape: it warns
# at every compile (on stderr, once per form and article) before matching the character itself
_PLAIN = frozenset("#&~" + string.whitespace)


def regex_literal(text: str) -> str:
    """A regex matching exactly ``text`` for an ``output: {regex: ...}`` form: ``re.escape``
    without the escapes that engines' regex readers do not know (white space, ``#``, ``&``, ``~``;
    each means itself unescaped)."""
    return "".join(c if c in _PLAIN else re.escape(c) for c in text)


def _check_output(prompt_id: str, kind: str, output: Any) -> None:
    """An ``output`` declaration: one of json (a valid JSON schema), regex (a pattern that
    compiles) or choice (a non-empty list of strings), on a generate or verbalized prompt."""
    if kind == "choice":
        raise PromptError(f"prompt {prompt_id}: a choice prompt scores its options; it declares no output")
    if not isinstance(output, dict) or len(output) != 1 or next(iter(output)) not in OUTPUT_KINDS:
        raise PromptError(f"prompt {prompt_id}: output must be one of {{json|regex|choice: ...}}")
    ((how, value),) = output.items()
    if how == "json":
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise PromptError(f"prompt {prompt_id}: output json is no JSON schema: {exc.message}") from exc
    elif how == "regex":
        try:
            re.compile(value)
        except (re.error, TypeError) as exc:
            raise PromptError(f"prompt {prompt_id}: output regex does not compile: {exc}") from exc
    elif not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        raise PromptError(f"prompt {prompt_id}: output choice must be a non-empty list of strings")


@functools.cache
def load_prompt(prompt_id: str) -> Prompt:
    """Load ``prompts/<group>/<name>.yaml`` for the id ``<group>.<name>``."""
    group, _, name = prompt_id.partition(".")
    if not group or not name:
        raise PromptError(f"prompt id {prompt_id!r} must look like '<group>.<name>'")
    path = PROMPTS_DIR / group / f"{name}.yaml"
    if not path.is_file():
        raise PromptError(f"no prompt file {path}")
    return parse_prompt(yaml.safe_load(path.read_text(encoding="utf-8")), expected_id=prompt_id)


def all_prompt_ids() -> list[str]:
    """Every prompt id shipped in ``prompts/``."""
    return sorted(f"{p.parent.name}.{p.stem}" for p in PROMPTS_DIR.glob("*/*.yaml"))
