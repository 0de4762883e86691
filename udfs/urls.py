"""URL normalisation shared by ingestion (article ids) and builders (joining cited URLs to articles).

``norm_url`` is the one canonical form: two URLs that point at the same article after the usual
cosmetic differences (scheme, ``www.``, port, fragment, tracking parameters, parameter order,
trailing slash, a Wayback Machine wrapper) normalise to the same string. A URL whose host is no
valid host name or IP address has no canonical form (``valid_host``).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

TRACKING_PARAMS = frozenset({"fbclid", "gclid", "ref", "mc_cid", "mc_eid"})
# One DNS label: letters (any script), digits, hyphens and underscores, not starting or ending with a
# hyphen, at most 63 characters. Underscores are not valid in host names but real crawls have them.
_LABEL = re.compile(r"^(?!-)[\w-]{1,63}(?<!-)$")
_WAYBACK = re.compile(r"^(?:https?://)?(?:www\.)?web\.archive\.org/web/[^/]+/(.+)$", re.IGNORECASE)


def clean_target_uri(uri: str | None) -> str | None:
    """Strip whitespace and the ``<…>`` wrapper some crawlers (GNU wget) put around WARC-Target-URI."""
    if uri is None:
        return None
    uri = uri.strip()
    if uri.startswith("<") and uri.endswith(">"):
        uri = uri[1:-1].strip()
    return uri or None


def valid_host(host: str | None) -> bool:
    """True for a DNS name (dot-separated labels, international letters allowed) or an IP address;
    False for what ``urlsplit`` accepts but no resolver would, such as ``exa mple.com`` or
    ``exa%20mple.com``."""
    if not host or len(host) > 253:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return all(_LABEL.match(label) for label in host.removesuffix(".").split("."))


def host_of(url: str | None) -> str | None:
    """Lower-cased host without ``www.`` and port, or None when the URL has no valid host."""
    if not url:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not valid_host(host):
        return None
    return host[4:] if host.startswith("www.") else host


def host_matches(host: str | None, domains: frozenset[str] | set[str]) -> bool:
    """True when ``host`` is one of ``domains`` or a subdomain of one (``edition.cnn.com`` ~ ``cnn.com``)."""
    if not host:
        return False
    parts = host.split(".")
    return any(".".join(parts[i:]) in domains for i in range(len(parts)))


def _is_tracking(key: str) -> bool:
    k = key.lower()
    return k.startswith("utm_") or k in TRACKING_PARAMS


def norm_url(url: str | None) -> str | None:
    """Canonical comparison form of a URL, or None when it is not an http(s) URL.

    Lower-cases scheme and host, treats http and https alike (https), drops ``www.``, the port,
    the fragment and tracking parameters, sorts the remaining query parameters, strips a trailing
    ``/`` and unwraps ``web.archive.org/web/<ts>/<url>``.
    """
    url = clean_target_uri(url)
    if not url:
        return None
    wayback = _WAYBACK.match(url)
    if wayback:
        inner = wayback.group(1)
        url = inner if re.match(r"^https?://", inner, re.IGNORECASE) else "http://" + inner
    if url.startswith("//"):
        url = "http:" + url
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not valid_host(host):
        return None
    host = host.lower().rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    path = quote(unquote(parts.path), safe="/:@!$&'()*+,;=-._~%") or "/"
    path = re.sub(r"/{2,}", "/", path)
    if len(path) > 1:
        path = path.rstrip("/")
    query = sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k))
    return urlunsplit(("https", host, "" if path == "/" else path, urlencode(query), ""))
