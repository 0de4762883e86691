"""``escaped_ids`` (tests/conftest.py): the test IDs that pytest-xdist's workers could collect
differently, which fail at setup with a message asking for explicit ids."""

from __future__ import annotations

from tests.conftest import escaped_ids

# As pytest writes them: a gzip member made at import time (its header stamps the current
# second, so two workers got two IDs and CI stopped), and a non-ASCII string.
STAMPED = (
    r"tests/unit/test_wikidump.py::test_files_without_pages[crawl.warc.gz-\x1f\x8b\x08\x00]\xcf\x0bk-False]"
)
NON_ASCII = r"tests/unit/test_prophet_outputs.py::test_query_form_examples[S\xe3o Paulo-True]"
PLAIN = "tests/unit/test_wikidump.py::test_files_without_pages[crawl.warc.gz-bytes-False]"


def test_ids_with_escaped_bytes_or_text_are_refused_and_plain_ones_pass():
    assert escaped_ids([STAMPED, PLAIN, NON_ASCII, "tests/a.py::test_b[São]"]) == [
        STAMPED,
        NON_ASCII,
        "tests/a.py::test_b[São]",
    ]
    assert escaped_ids([PLAIN, "tests/a.py::test_b[x-1]"]) == []
