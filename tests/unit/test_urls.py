from udfs.urls import clean_target_uri, host_matches, host_of, norm_url, valid_host


def test_wget_angle_brackets_are_removed():
    assert clean_target_uri("<http://example.com/a>") == "http://example.com/a"
    assert clean_target_uri("  http://example.com/a ") == "http://example.com/a"
    assert clean_target_uri("<>") is None


def test_norm_url_folds_cosmetic_differences():
    a = norm_url("http://www.Example.com:80/News/story/?utm_source=x&b=2&a=1#top")
    b = norm_url("https://example.com/News/story?a=1&b=2&fbclid=abc")
    assert a == b == "https://example.com/News/story?a=1&b=2"


def test_norm_url_unwraps_wayback_and_keeps_path_case():
    assert norm_url("https://web.archive.org/web/20150901000000/http://www.bbc.co.uk/news/x") == (
        "https://bbc.co.uk/news/x"
    )
    assert norm_url("https://example.com/A") != norm_url("https://example.com/a")


def test_norm_url_rejects_non_http():
    assert norm_url("dns:example.com") is None
    assert norm_url("mailto:someone@example.com") is None
    assert norm_url("") is None
    assert norm_url("https://example.com/") == "https://example.com"


def test_host_helpers():
    assert host_of("https://www.npr.org/2022/09/15/x") == "npr.org"
    assert host_of("not a url") is None
    assert host_matches("edition.cnn.com", {"cnn.com"})
    assert not host_matches("notcnn.com", {"cnn.com"})


def test_invalid_hosts_have_no_canonical_form():
    for url in ("https://exa mple.com/a b", "https://exa%20mple.com/a", "https://-bad.com/", "https://a..b/"):
        assert norm_url(url) is None and host_of(url) is None, url
    assert norm_url("https://Münche-n.de/x") == "https://münche-n.de/x"
    assert host_of("https://a_b.example.com/x") == "a_b.example.com"
    assert host_of("http://127.0.0.1:8080/x") == "127.0.0.1" and host_of("http://[::1]/x") == "::1"
    assert not valid_host("x" * 64 + ".com") and valid_host("example.com.")
