"""Prompt files: strict rendering, load-time validation, and golden renders of every prompt.

A golden file holds ``# <id> v<version>`` and the prompt rendered with its ``example``
variables. Changing a prompt's text without bumping its version fails here; regenerate the
golden files with ``pytest tests/unit/test_prompts.py --update-golden`` after bumping."""

import json
import re
import string
from pathlib import Path

import pytest

from udfs.daily_oracle.outputs import qa_output
from udfs.evaluate.answers import verbalized_output
from udfs.openforecast.outputs import reorder_output
from udfs.prompts import PromptError, all_prompt_ids, load_prompt, parse_prompt, regex_literal
from udfs.tcelongbench.outputs import forecast_regex

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "prompts"

BASE = {
    "id": "g.p",
    "version": 1,
    "purpose": "test",
    "kind": "generate",
    "variables": ["a"],
    "output_format": "text",
    "user": "Hello {{ a }}",
}


def test_missing_variable_is_an_error():
    prompt = parse_prompt(BASE)
    with pytest.raises(PromptError, match="missing variables"):
        prompt.render({})
    assert prompt.render({"a": "x"}).user == "Hello x"


def test_nested_undefined_attribute_is_an_error():
    prompt = parse_prompt({**BASE, "user": "{{ a.title }}"})
    with pytest.raises(PromptError):
        prompt.render({"a": {}})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"user": "Hello {{ a }} {{ b }}"}, "undeclared"),
        ({"variables": ["a", "b"]}, "never used"),
        ({"kind": "poem"}, "kind"),
        ({"version": 0}, "version"),
        ({"kind": "choice"}, "answer_prefix"),
        ({"colour": "red"}, "unknown keys"),
        ({"output": {"xml": "x"}}, "output must be one of"),
        ({"output": {"json": {"type": "no-such-type"}}}, "no JSON schema"),
        ({"output": {"regex": "(unclosed"}}, "does not compile"),
        ({"output": {"choice": []}}, "non-empty list"),
        ({"output": {"regex": "a", "json": {}}}, "output must be one of"),
        ({"kind": "choice", "answer_prefix": "A:", "output": {"regex": "a"}}, "declares no output"),
    ],
)
def test_malformed_prompt_files_are_rejected(change, message):
    with pytest.raises(PromptError, match=message):
        parse_prompt({**BASE, **change})


def test_an_output_declaration_is_kept_as_data():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert parse_prompt({**BASE, "output": {"json": schema}}).output == {"json": schema}
    assert parse_prompt({**BASE, "kind": "verbalized", "output": {"regex": r"\*0\.\d\d\*"}}).output
    assert parse_prompt(BASE).output is None


def test_id_must_match_the_file():
    with pytest.raises(PromptError, match="declares id"):
        parse_prompt(BASE, expected_id="g.other")


def test_every_prompt_has_an_example_and_a_golden_render(update_golden):
    ids = all_prompt_ids()
    assert ids, "no prompts shipped"
    stale = []
    for prompt_id in ids:
        prompt = load_prompt(prompt_id)
        assert prompt.example, f"{prompt_id} has no example variables"
        text = f"# {prompt_id} v{prompt.version}\n" + prompt.render(prompt.example).plain_text() + "\n"
        if prompt.output:  # the declared answer form is part of the prompt's contract
            text += "# output: " + json.dumps(prompt.output, sort_keys=True, ensure_ascii=False) + "\n"
        path = GOLDEN / f"{prompt_id}.txt"
        if update_golden:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            continue
        assert path.is_file(), f"no golden render for {prompt_id}; run with --update-golden"
        golden = path.read_text(encoding="utf-8")
        if golden != text:
            header = golden.splitlines()[0]
            bumped = header != f"# {prompt_id} v{prompt.version}"
            stale.append(
                f"{prompt_id}: {'version bumped, refresh golden' if bumped else 'text changed, bump version'}"
            )
    assert not stale, stale


def test_golden_files_have_prompts():
    orphans = [p.stem for p in GOLDEN.glob("*.txt") if p.stem not in all_prompt_ids()]
    assert not orphans, f"golden files without a prompt: {orphans}"


# The free-text answer format reproduces the papers' unconstrained answers, whose refusals it
# counts: constraining it would make a refusal impossible.
FREE_TEXT = {"evaluate.forecast_text", "evaluate.forecast_scratchpad", "evaluate.forecast_cot"}


def test_every_generated_answer_declares_its_form():
    """Every generate and verbalized prompt declares its answer as data (``output:``), so every
    backend can enforce it and the runner checks it before any parser runs."""
    undeclared = {
        prompt_id
        for prompt_id in all_prompt_ids()
        if (prompt := load_prompt(prompt_id)).kind in ("generate", "verbalized") and not prompt.output
    }
    assert undeclared == FREE_TEXT, f"generate/verbalized prompts without an output declaration: {undeclared}"


LITERALS = [string.printable, "September 2022", "Q&A #3 ~ a\\ b", "2015-09-28", "São Paulo (Yes) [No]"]


@pytest.mark.parametrize("text", LITERALS, ids=range(len(LITERALS)))
def test_a_regex_literal_matches_its_text_alone_and_compiles_in_xgrammar_without_warnings(text, capfd):
    """Python's re.escape also escapes white space, '#', '&' and '~': xgrammar printed a warning
    for each at every compile of a form (Daily Oracle's qa form per article: "Escape sequence
    '\\ ' is not recognized"). The forms that place literal text: Daily Oracle's qa (the month),
    OpenForecast's reorder (the events), the verbalized distribution (the labels), TCELongBench's
    forecast question (the day)."""
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    pattern = regex_literal(text)
    assert re.fullmatch(pattern, text) and not re.fullmatch(pattern, text + "x")
    capfd.readouterr()
    grammar = xgrammar.Grammar.from_regex(pattern)
    assert _is_grammar_accept_string(grammar, text) and not _is_grammar_accept_string(grammar, text + "x")
    for form in (
        qa_output(month_year=text)["regex"],
        reorder_output([text, "Another event"])["regex"],
        verbalized_output([text, "B"])["regex"],
        forecast_regex(40, text),
    ):
        xgrammar.Grammar.from_regex(form)
    assert capfd.readouterr().err == ""
