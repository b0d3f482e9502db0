"""The console's HTML: escaped by default, one layout (``templates/base.html``), and the pieces
every page uses (tables, pagination links, a POST form with its CSRF field).

No template engine: a value goes into HTML through :func:`h` (``str.format`` with every value
escaped) unless it is :class:`Markup` already, so a memory's text, a tool's result or a model's
answer is always shown as text, never run as HTML.
"""

from __future__ import annotations

import html
import json
import string
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

NAV = (
    ("/", "Dashboard"),
    ("/memory", "Memory"),
    ("/runs", "Runs"),
    ("/drafts", "Drafts"),
    ("/why", "Why"),
    ("/lessons", "Lessons"),
    ("/health", "Health"),
    ("/chat", "Chat"),
)


class Markup(str):
    """Text that is HTML already (built by :func:`h`), inserted as it is. Adding text to it
    escapes the text."""

    __slots__ = ()

    def __add__(self, other: str) -> Markup:
        return Markup(str.__add__(self, esc(other)))

    def __radd__(self, other: str) -> Markup:
        return Markup(str.__add__(esc(other), self))


def esc(value: Any) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def h(template: str, *args: Any, **values: Any) -> Markup:
    """``template.format`` with every argument escaped (a :class:`Markup` one as it is)."""
    return Markup(
        template.format(*(esc(a) for a in args), **{k: esc(v) for k, v in values.items()})
    )


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    return Markup(sep.join(esc(p) for p in parts))


def url(path: str, params: Mapping[str, Any] | None = None) -> str:
    """``path`` with the non-empty ``params`` as its query string."""
    kept = {k: v for k, v in (params or {}).items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def when(value: datetime | str | None) -> str:
    """A time as the console shows it: UTC, to the second."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        at = value
    return at.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if at.tzinfo else "")


def stamp(value: datetime | str | None) -> Markup:
    """:func:`when` as a ``<time>`` that does not wrap (for table cells)."""
    return h("<time>{}</time>", when(value))


def snippet(text: str, limit: int = 120) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def pretty(value: Any) -> str:
    """A JSON value as readable text (a string as it is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    empty: str = "Nothing here.",
    cls: str = "",
) -> Markup:
    """A table; each cell names its column (``data-col``), so a narrow window can show a row
    as a card of labelled fields (console.css). ``cls``: the table's own class."""
    names = list(headers)
    body = [
        h(
            "<tr>{}</tr>",
            join(
                h('<td data-col="{}">{}</td>', names[i] if i < len(names) else "", c)
                for i, c in enumerate(row)
            ),
        )
        for row in rows
    ]
    if not body:
        return h('<p class="empty">{}</p>', empty)
    head = join(h('<th scope="col">{}</th>', t) for t in headers)
    return h(
        '<div class="table-wrap"><table class="{}"><thead><tr>{}</tr></thead><tbody>{}</tbody>'
        "</table></div>",
        cls,
        head,
        join(body),
    )


def facts(items: Iterable[tuple[str, Any]]) -> Markup:
    """A definition list of (label, value) pairs; empty values are left out."""
    rows = [h("<dt>{}</dt><dd>{}</dd>", k, v) for k, v in items if v not in (None, "", [], {})]
    return h('<dl class="facts">{}</dl>', join(rows))


def pre(text: Any, cls: str = "") -> Markup:
    return h('<pre class="{}">{}</pre>', cls, pretty(text))


def memory_href(memory_id: str, action: str = "") -> str:
    """The page of a memory row (or one of its buttons' targets), its id quoted."""
    return f"/memory/{quote(memory_id, safe='')}" + (f"/{action}" if action else "")


def link(href: str, text: Any) -> Markup:
    return h('<a href="{}">{}</a>', href, text)


def badge(text: str) -> Markup:
    return h('<span class="badge badge-{}">{}</span>', text.replace(" ", "-"), text)


def pager(
    path: str, params: Mapping[str, Any], offset: int, limit: int, shown: int, total: int | None
) -> Markup:
    """ "Rows a–b of N" with previous/next links (``total`` None: unknown, next while full)."""
    if shown == 0 and offset == 0:
        return Markup("")
    first, last = offset + 1, offset + shown
    count = h("rows {}–{}", first, last) + (h(" of {}", total) if total is not None else "")
    links = []
    if offset > 0:
        back = {**params, "offset": max(0, offset - limit) or None, "limit": limit}
        links.append(h('<a rel="prev" href="{}">← previous</a>', url(path, back)))
    more = last < total if total is not None else shown == limit
    if more:
        ahead = {**params, "offset": offset + limit, "limit": limit}
        links.append(h('<a rel="next" href="{}">next →</a>', url(path, ahead)))
    return h('<nav class="pager" aria-label="pages">{} {}</nav>', count, join(links, " "))


def cards(items: Iterable[tuple[str, Any, str]]) -> Markup:
    """Big numbers that link to their pages: (href, number, what it counts)."""
    return h(
        '<div class="cards">{}</div>',
        join(
            h(
                '<a class="card" href="{}"><span class="n">{}</span>'
                '<span class="what">{}</span></a>',
                href,
                n,
                what,
            )
            for href, n, what in items
        ),
    )


def post_button(action: str, csrf: str, label: str, *, cls: str = "") -> Markup:
    """A form that POSTs to ``action`` with the session's CSRF token: one button."""
    return h(
        '<form method="post" action="{}" class="inline">'
        '<input type="hidden" name="csrf" value="{}">'
        '<button type="submit" class="{}">{}</button></form>',
        action,
        csrf,
        cls,
        label,
    )


def select(name: str, label: str, options: Iterable[str], chosen: str) -> Markup:
    opts = [h('<option value="">any</option>')]
    for value in options:
        mark = " selected" if value == chosen else ""
        opts.append(h('<option value="{}"{}>{}</option>', value, Markup(mark), value))
    return h(
        '<label>{} <select name="{}" data-autosubmit>{}</select></label>', label, name, join(opts)
    )


@cache
def _layout() -> string.Template:
    text = resources.files(__package__).joinpath("templates", "base.html").read_text("utf-8")
    return string.Template(text)


def page(
    title: str,
    body: Markup,
    *,
    operator: str = "",
    csrf: str = "",
    active: str = "",
    flash: Sequence[str] = (),
) -> str:
    """A whole page in the layout: the header with the navigation and who is logged in (and
    the logout button) when ``operator`` is known."""
    nav = join(
        h(
            '<a href="{}"{}>{}</a>',
            href,
            Markup(' aria-current="page"' if href == active else ""),
            n,
        )
        for href, n in NAV
    )
    who = Markup("")
    if operator:
        logout = post_button("/logout", csrf, "Log out", cls="link")
        who = h('<span class="who">operator <strong>{}</strong></span>{}', operator, logout)
        nav = h('<nav class="main" aria-label="console">{}</nav>', nav)
    else:
        nav = Markup("")
    notes = join(h('<p class="flash" role="status">{}</p>', f) for f in flash)
    return _layout().substitute(
        title=esc(title), nav=nav, who=who, flash=notes, body=body, heading=esc(title)
    )
