"""The declared answer forms of the PROPHET prompts (``udfs.prophet.outputs``): the prompt files
declare them for their own budgets, every string a form allows is accepted by the stage's parser
(property tests over strings drawn from the regex), copied placeholders and cut answers are not
allowed, and the stages narrow the forms to a run's options and ``--max-new-tokens``."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.llm.attempts import fit
from pipelines.llm.config import LLMConfig
from pipelines.prophet.config import Config
from pipelines.prophet.stages import cil_stages, query_stage, relevance_stage
from udfs.llm_parsing import ParseError, check_output, parse_verbalized_probability
from udfs.prompts import load_prompt
from udfs.prophet import outputs
from udfs.prophet.parsing import parse_query_list, parse_rating

PREFIX = 'Output: ["'  # the query prompts' answer prefix, read by the parser with the answer
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_prompt_files_declare_the_forms_of_their_own_budgets():
    assert load_prompt("prophet.query_entities").output == {
        "regex": outputs.query_regex(outputs.ENTITY_ITEMS, outputs.ENTITY_WORDS, 96)
    }
    for kind in ("steps", "similar"):  # the builder's defaults: 5 queries of at most 8 words
        assert load_prompt(f"prophet.query_{kind}").output == {"regex": outputs.query_regex(5, 8, 128)}
    assert load_prompt("prophet.relevance").output == {"regex": outputs.rating_regex(256)}
    for name in ("joint", "joint_grouped", "conditional", "conditional_grouped"):
        prompt = load_prompt(f"prophet.{name}")
        assert prompt.output == {"regex": outputs.verbalized_regex(prompt.sampling["max_tokens"])}
        assert "stop" not in prompt.sampling  # a stop string would cut a declared answer


@pytest.mark.parametrize(("items", "words", "tokens"), [(2, 8, 16), (8, 5, 16), (8, 5, 96), (5, 8, 128)])
def test_query_lists_fit_their_budget(items, words, tokens):
    n, w = outputs.query_shape(items, words, tokens)
    assert 1 <= n <= items and 1 <= w <= words
    assert n * (2 + w * outputs.TOKENS_PER_WORD) + 1 <= tokens or (n == 1 and w == 1)
    assert outputs.query_shape(2, 8, 16) == (2, 2)  # the demo: 2 queries, 16 new tokens


def test_the_declared_letters_are_word_characters():
    """× and ÷ sit inside À–ɏ: a query of them matched the declared form, then had no word to
    parse (hypothesis found ``÷"]``)."""
    pattern = re.compile(outputs.query_regex(3, 4, 64))
    assert not pattern.fullmatch('÷"]') and not pattern.fullmatch('Dow ×"]')
    assert pattern.fullmatch('São Paulo", "Zürich"]')


@given(st.from_regex(outputs.query_regex(3, 4, 64), fullmatch=True))
@FUZZ
def test_every_declared_query_list_parses(text):
    queries = parse_query_list(PREFIX + text, limit=3)["queries"]
    assert 1 <= len(queries) <= 3 and all(len(q.split()) <= 4 for q in queries)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('CBRE Group", "commercial real estate"]', True),
        ('Nasdaq 100", "S&P 500 record"]', True),
        ('Events 2024", "Stepping down"]', True),  # longer words than the placeholders
        pytest.param('São Paulo", "Zelenskyy"]', True, id="non-ascii"),
        ('event 1", "Entity 2"]', False),  # the prompt's format placeholders
        ('Query", "Step"]', False),
        ('oil price", "Brent crude"', False),  # not closed: cut by max_tokens
        ('1000000000000"]', False),  # a run of digits eats one token per digit
        ('job-posting- 2024"]', False),  # hyphen chains cost a token a piece
        ('entity-id"]', False),
        ('a", "b", "c", "d"]', False),  # more items than asked
        ('Fed" ]', False),
        ('"Fed"]', False),
    ],
)
def test_query_form_examples(text, ok):
    pattern = outputs.query_regex(3, 4, 64)
    assert (re.fullmatch(pattern, text) is not None) == ok


@given(st.from_regex(outputs.rating_regex(40), fullmatch=True))
@FUZZ
def test_every_declared_rating_parses_to_its_last_line(text):
    assert parse_rating("Thoughts:" + text)["rating"] == int(text[-1])


@given(st.from_regex(outputs.verbalized_regex(40), fullmatch=True))
@FUZZ
def test_every_declared_verbalized_answer_parses_to_its_final_probability(text):
    value = text[text.rindex("*", 0, len(text) - 1) + 1 : -1]
    assert parse_verbalized_probability(text)["prob"] == float(value)


@pytest.mark.parametrize(
    ("form", "text"),
    [
        (outputs.rating_regex(40), " good\nRating: 7"),
        (outputs.rating_regex(40), " two\nlines\nRating: 3"),
        (outputs.rating_regex(16), " " + "x" * 30 + "\nRating: 3"),  # longer than the budget allows
        (outputs.verbalized_regex(40), " so *0.5* then *0.7*"),
        (outputs.verbalized_regex(40), " so 0.7"),
        (outputs.verbalized_regex(40), " so *0.625*"),  # the paper's two decimals at most
        (outputs.verbalized_regex(40), " so *0.7* done"),
    ],
)
def test_malformed_answers_fail_the_declared_form(form, text):
    with pytest.raises(ParseError):
        check_output({"regex": form}, text)


def test_stages_narrow_the_forms_to_the_run():
    def sent(stage, config):  # the form the ledger sends under the run's cap
        return fit(stage, config.llm.max_new_tokens).structured

    demo = Config(root="r", questions="q", num_queries=2, llm=LLMConfig(max_new_tokens=16))
    assert sent(query_stage("steps", demo), demo) == {"regex": outputs.query_regex(2, 8, 16)}
    assert sent(query_stage("entities", demo), demo) == {"regex": outputs.query_regex(8, 5, 16)}
    uncapped = Config(root="r", questions="q")
    assert sent(query_stage("similar", uncapped), uncapped) == load_prompt("prophet.query_similar").output
    assert sent(relevance_stage(uncapped, {}, {}), uncapped) == load_prompt("prophet.relevance").output
    assert sent(relevance_stage(demo, {}, {}), demo) == {"regex": outputs.rating_regex(16)}
    joint, conditional = cil_stages(demo, {}, {})
    assert sent(joint, demo) == sent(conditional, demo) == {"regex": outputs.verbalized_regex(16)}
    logprob = Config(root="r", questions="q", estimator="logprob", llm=LLMConfig(max_new_tokens=16))
    assert all(sent(s, logprob) is None for s in cil_stages(logprob, {}, {}))
    grouped = Config(root="r", questions="q", layout="grouped")
    assert sent(cil_stages(grouped, {}, {})[1], grouped) == load_prompt("prophet.conditional_grouped").output
