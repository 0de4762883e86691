"""Language detection: ISO 639-1 codes only, deterministic, the page's own ``lang`` when the text
has no letters to judge by."""

from __future__ import annotations

import pytest

from udfs.news_extract import LANGUAGE_CHARS, detect_language

SENTENCES = {
    "en": "The city council approved the new budget on Tuesday after a long debate about schools.",
    "de": "Der Stadtrat hat am Dienstag nach einer langen Debatte über die Schulen den Haushalt beschlossen.",
    "es": "El ayuntamiento aprobó el martes el nuevo presupuesto tras un largo debate sobre las escuelas.",
    "pt": "A câmara municipal aprovou na terça-feira o novo orçamento depois de um longo debate.",
    "ru": "Городской совет во вторник утвердил новый бюджет после долгих споров о школах.",
    "el": "Το δημοτικό συμβούλιο ενέκρινε την Τρίτη τον νέο προϋπολογισμό μετά από μακρά συζήτηση.",
    "zh": "市议会周二在就学校问题进行长时间辩论后批准了新的预算。",
}


@pytest.mark.parametrize("code", sorted(SENTENCES))
def test_each_language_by_its_iso_639_1_code(code):
    assert detect_language(SENTENCES[code]) == code


def test_chinese_written_in_a_regional_variety_is_still_zh():
    # the model also knows Wu and Cantonese (three-letter codes); the column holds ISO 639-1
    assert detect_language("呢個係香港嘅新聞，今日天氣好好，我哋去咗海邊食嘢。") == "zh"


def test_no_letters_falls_back_to_the_declared_language():
    assert detect_language("2024-03-01 12:00 | 1,234 — 56.7 %", fallback="de-AT") == "de"
    assert detect_language("12345 67890") is None


def test_only_the_first_characters_decide_and_the_answer_is_repeatable():
    text = SENTENCES["en"] * (LANGUAGE_CHARS // len(SENTENCES["en"]) + 1) + SENTENCES["de"] * 50
    assert {detect_language(text) for _ in range(5)} == {"en"}
