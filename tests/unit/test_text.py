"""udfs.text.first_words: the word limit also bounds text in scripts written without spaces (a
Chinese article of 6,000 characters is 56 whitespace "words": it overflowed the local model's
2,048-token window under a 60-word limit in the demo)."""

from udfs.text import first_words


def test_spaced_text_is_cut_at_whitespace_words():
    assert first_words("one  two\nthree four", 3) == "one two three"
    assert first_words("one  two\nthree", 3) == "one  two\nthree"  # short enough: layout kept


def test_each_character_of_an_unspaced_script_is_a_word():
    text = "我国卫生与健康领域有了基本法 and more words"
    assert first_words(text, 4) == "我国卫生"
    assert first_words("中国GDP增长 快", 4) == "中国GDP增"  # joined pieces stay joined
    assert first_words("한국어 문장입니다", 3) == "한국어"
    assert len(first_words("字" * 6000, 60)) == 60
