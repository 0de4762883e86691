"""Regression test for ``udfs.prompts.Prompt.render``, found while rendering PROPHET's CIL
requests (up to 2·2^K_max per article): each template must be compiled once, not once per render
(compiling took ~25× longer than rendering, so a 100k-request stage spent minutes compiling)."""

import jinja2

import udfs.prompts as prompts
from udfs.prompts import load_prompt


def test_templates_are_compiled_once_and_render_the_same(monkeypatch):
    prompt = load_prompt("prophet.conditional_yesno")
    expected = prompt.render(prompt.example).plain_text()
    compiled = []
    real = prompts._ENV.from_string

    def counting(source, *args, **kwargs):
        compiled.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(prompts._ENV, "from_string", counting)
    prompts._template.cache_clear()
    texts = {prompt.render(prompt.example).plain_text() for _ in range(5)}
    assert texts == {expected}
    assert compiled == [prompt.user_template]
    assert isinstance(prompts._template(prompt.user_template), jinja2.Template)
