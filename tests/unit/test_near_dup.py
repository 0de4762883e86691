"""udfs.near_dup: shingles, MinHash signatures and band keys."""

from __future__ import annotations

import subprocess
import sys

from udfs import near_dup

TEXT = (
    "The city council approved the new budget on Thursday after a debate that lasted more than six "
    "hours, and members argued over funding for schools, road repairs and the public library."
)


def test_near_identical_texts_share_bands_and_unrelated_ones_do_not():
    a_sh, a_bands = near_dup.sketch(TEXT)
    b_sh, b_bands = near_dup.sketch(TEXT.replace("six hours", "seven hours"))
    c_sh, c_bands = near_dup.sketch(
        "Heavy rain flooded several streets in the harbour district overnight again."
    )
    assert len(a_bands) == near_dup.BANDS and len(a_sh) == len(TEXT.split()) - 2
    assert 0.8 < near_dup.jaccard(a_sh, b_sh) < 1.0
    assert set(a_bands) & set(b_bands)
    assert near_dup.jaccard(a_sh, c_sh) == 0.0 and not set(a_bands) & set(c_bands)


def test_case_punctuation_and_short_texts():
    assert near_dup.shingles("Budget, approved!  Today.") == near_dup.shingles("budget approved today")
    assert len(near_dup.shingles("two words")) == 1
    assert near_dup.sketch("  ... ") == ([], [])


def test_sketches_do_not_depend_on_the_process():
    """No salted hash(): another interpreter with another hash seed gives the same band keys."""
    code = f"from udfs import near_dup; print(near_dup.sketch({TEXT!r})[1])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
    )
    assert out.stdout.strip() == str(near_dup.sketch(TEXT)[1])
