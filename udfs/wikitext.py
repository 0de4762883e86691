"""Wikitext of one Wikipedia page → plain lead, sections and categories (mwparserfromhell).

Plain text is what the builders feed to length filters, section-title heuristics and LLM prompts,
so the renderer keeps prose and table cells and drops what a reader never sees as text:
references, templates (except a few inline ones that stand for words), files, categories and
interlanguage links. ``PlainText`` is also used by the WCEP parser for event bullets, so both
tables render wikitext the same way. Nothing here imports Spark.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import unquote

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

# Tags whose content is not running text (citations, galleries, maths, score, maps, …).
_HIDDEN_TAGS = frozenset(
    {
        "ref",
        "references",
        "gallery",
        "timeline",
        "imagemap",
        "score",
        "templatedata",
        "templatestyles",
        "graph",
        "mapframe",
        "maplink",
        "math",
        "chem",
        "ce",
        "hiero",
        "inputbox",
        "categorytree",
        "indicator",
        "syntaxhighlight",
        "source",
        "style",
    }
)
# Inline templates that stand for literal characters.
_LITERAL_TEMPLATES = {
    "'": "'",
    "'s": "'s",
    "nbsp": " ",
    "ndash": "–",
    "snd": " – ",
    "spaced ndash": " – ",
    "mdash": "—",
    "spaced mdash": " — ",
}
# Inline templates rendered as their first positional parameter.
_FIRST_PARAM_TEMPLATES = frozenset({"nowrap", "nobr", "small", "big", "abbr", "vanchor"})
# Interlanguage-link templates: rendered as the English title, which is also the link target.
_ILL_TEMPLATES = frozenset({"ill", "interlanguage link", "illm", "interlanguage link multi"})
_FILE_NAMESPACES = frozenset({"file", "image", "media"})
_LANGUAGE_PREFIX = re.compile(r"[a-z]{2,3}(?:-[a-z]+)*|simple")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_EMPTY_PARENS = re.compile(r" ?\(\s*[,;:]?\s*[,;]?\s*\)")
_LEADING_SEPARATORS = re.compile(r"\(\s*(?:[,;]\s*)+")  # "(; ; born 1954)" after dropped templates
_REDIRECT = re.compile(r"^\s*#REDIRECT\s*:?\s*\[\[([^\]|]+)", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\f\v]+")
_HEADING_LINE = re.compile(r"^(={1,6})(.+?)(={1,6})[ \t]*(?:<!--.*?-->[ \t]*)*$", re.MULTILINE)


def normalize_title(title: str | None) -> str | None:
    """A page title as MediaWiki stores it: spaces for underscores, no fragment, first letter upper."""
    if title is None:
        return None
    title = " ".join(title.replace("_", " ").split("#", 1)[0].split())
    return title[:1].upper() + title[1:] if title else None


def _template_name(template: Template) -> str:
    name = " ".join(str(template.name).replace("_", " ").split()).lower()
    return name.removeprefix("template:")


def _positional(template: Template, index: int) -> Wikicode | None:
    """The ``index``-th (1-based) positional parameter, or None."""
    key = str(index)
    return template.get(key).value if template.has(key) else None


@dataclass
class PlainText:
    """Renders wikicode as plain text and records the links and categories it passes.

    ``links`` collects article link targets in page order (normalised titles); ``categories``
    the ``[[Category:…]]`` memberships. One instance per page or per bullet.
    """

    links: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)

    def render(self, code: Wikicode | None) -> str:
        if code is None:
            return ""
        return "".join(self.node(n) for n in code.nodes)

    def node(self, node: Node) -> str:
        if isinstance(node, Text):
            return node.value
        if isinstance(node, Wikilink):
            return self._wikilink(node)
        if isinstance(node, ExternalLink):
            if node.title is not None:
                return self.render(node.title)
            return "" if node.brackets else str(node.url)
        if isinstance(node, Template):
            return self._template(node)
        if isinstance(node, Tag):
            return self._tag(node)
        if isinstance(node, HTMLEntity):
            return node.normalize()
        if isinstance(node, Heading):
            return self.render(node.title)
        if isinstance(node, Argument):
            return self.render(node.default)
        return ""  # comments

    def _wikilink(self, link: Wikilink) -> str:
        title = str(link.title).strip()
        visible = title.startswith(":")
        title = title.lstrip(":").strip()
        prefix, colon, rest = title.partition(":")
        prefix = prefix.strip().lower()
        if colon and not visible:
            if prefix == "category":
                name = normalize_title(rest)
                if name and name not in self.categories:
                    self.categories.append(name)
                return ""
            if prefix in _FILE_NAMESPACES:
                return ""
            if link.text is None and _LANGUAGE_PREFIX.fullmatch(prefix):
                return ""  # interlanguage link at the page bottom
        target = normalize_title(title)
        if target:
            self.links.append(target)
        return self.render(link.text) if link.text is not None else title

    def _template(self, template: Template) -> str:
        name = _template_name(template)
        if name in _LITERAL_TEMPLATES:
            return _LITERAL_TEMPLATES[name]
        if name in _ILL_TEMPLATES:
            first = _positional(template, 1)
            target = normalize_title(self._quiet(first))
            if target:
                self.links.append(target)
            label = template.get("lt").value if template.has("lt") else first
            return self._quiet(label)
        if name in _FIRST_PARAM_TEMPLATES:
            return self.render(_positional(template, 1))
        if name == "lang":
            return self.render(_positional(template, 2))
        if name.startswith("lang-"):
            return self.render(_positional(template, 1))
        if name in ("convert", "cvt"):
            value, unit = self._quiet(_positional(template, 1)), self._quiet(_positional(template, 2))
            return f"{value} {unit}".strip()
        return ""

    def _quiet(self, code: Wikicode | None) -> str:
        """Render without recording links (template parameters that are not links themselves)."""
        return PlainText().render(code).strip()

    def _tag(self, tag: Tag) -> str:
        name = str(tag.tag).strip().lower()
        if name in _HIDDEN_TAGS:
            return ""
        if name == "br":
            return "\n"
        if name in ("li", "dt", "dd", "hr") and tag.wiki_markup:
            return ""  # list and rule markers; the item text follows as siblings
        inner = self.render(tag.contents)
        if name in ("td", "th"):
            return "\t" + " ".join(inner.split())
        if name in ("tr", "caption"):
            return "\n" + inner
        if name == "table":
            return "\n" + inner + "\n"
        return inner


def drop_unparsed_templates(text: str) -> str:
    """Remove balanced ``{{…}}`` spans left in rendered text.

    mwparserfromhell gives up on some large templates (infoboxes with unusual nesting) and
    returns them as plain text; whatever still sits between balanced double braces after
    rendering is such template markup. Unbalanced braces are kept as they are.
    """
    out: list[str] = []
    opened: list[int] = []  # positions in ``out`` where an open {{ began
    i = 0
    while i < len(text):
        pair = text[i : i + 2]
        if pair == "{{":
            opened.append(len(out))
            out.append(pair)
            i += 2
        elif pair == "}}" and opened:
            del out[opened.pop() :]
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def tidy(text: str) -> str:
    """Whitespace and leftovers of dropped markup: no unparsed templates, one space between words,
    table cells joined by `` | ``, no empty brackets left by removed templates, at most one blank
    line in a row."""
    text = _MAGIC_WORD.sub("", drop_unparsed_templates(text).replace("\xa0", " "))
    lines = []
    for line in text.split("\n"):
        if "\t" in line:
            line = " | ".join(cell.strip() for cell in line.split("\t") if cell.strip())
        line = _EMPTY_PARENS.sub("", _SPACES.sub(" ", line))
        line = _LEADING_SEPARATORS.sub("(", line).strip()
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def one_line(text: str) -> str:
    """Collapse all whitespace (including no-break spaces) to single spaces."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    text: str


@dataclass(frozen=True)
class ParsedPage:
    """The plain-text parts of one page (see ``udfs.schemas.WIKI_PAGES``)."""

    lead: str | None
    sections: list[Section]
    categories: list[str]
    is_redirect: bool
    redirect_target: str | None

    @property
    def n_words(self) -> int:
        """Whitespace tokens of lead plus section texts (the OpenForecast length filter counts these)."""
        return len((self.lead or "").split()) + sum(len(s.text.split()) for s in self.sections)


def parse_page(wikitext: str | None, redirect_title: str | None = None) -> ParsedPage:
    """Split a page into lead and sections of plain text and collect its categories.

    Sections are cut at heading lines before parsing, so that unbalanced markup (an unclosed
    ``''``, which mwparserfromhell lets run across headings) stays inside one section.
    ``redirect_title`` is the dump's ``<redirect title=…>``; a ``#REDIRECT [[…]]`` line marks a
    redirect too. A redirect keeps its categories but has no lead or sections.
    """
    wikitext = wikitext or ""
    match = _REDIRECT.match(wikitext)
    is_redirect = redirect_title is not None or match is not None
    target = normalize_title(redirect_title or (match.group(1) if match else None))
    renderer = PlainText()
    headings = list(_HEADING_LINE.finditer(wikitext))
    bounds = [m.start() for m in headings[1:]] + [len(wikitext)] * bool(headings)
    lead = tidy(
        renderer.render(mwparserfromhell.parse(wikitext[: headings[0].start() if headings else None]))
    )
    sections = [
        Section(
            level=min(len(heading.group(1)), len(heading.group(3))),
            title=one_line(renderer.render(mwparserfromhell.parse(heading.group(2).strip()))),
            text=tidy(renderer.render(mwparserfromhell.parse(wikitext[heading.end() : end]))),
        )
        for heading, end in zip(headings, bounds, strict=True)
    ]
    if is_redirect:
        return ParsedPage(None, [], renderer.categories, True, target)
    return ParsedPage(lead, sections, renderer.categories, False, None)


def parse_timestamp(value: str | None) -> datetime | None:
    """An ISO-8601 revision timestamp (``2021-04-27T13:53:16Z``) as an aware UTC datetime."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def input_stem(path: str) -> str:
    """The name a dump or data file is known by in partition values: its file name without
    compression and data extensions (``enwiki-20240320-pages-articles.xml.bz2`` →
    ``enwiki-20240320-pages-articles``)."""
    name = posixpath.basename(unquote(path.rstrip("/")))
    for suffix in (".bz2", ".gz"):
        name = name.removesuffix(suffix)
    for suffix in (".xml", ".jsonl", ".ndjson", ".json", ".rss"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
