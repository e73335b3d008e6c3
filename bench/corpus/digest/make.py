"""Writes the digest corpus's article pages and feeds from ``stories.json``:
``python bench/corpus/digest/make.py``. The pages are the checked-in fixtures; this script is
how they were made, so that a story can be edited in one place.

Each site has a page layout of its own, with the clutter real news pages have around the text
(menus, share buttons, related headlines, comments, cookie notes, long footers), so that an
extractor is measured on telling the article from the rest. Links in the feeds point at
``http://corpus.test``; the benchmark's server puts its own address there.
"""

from __future__ import annotations

import json
from datetime import datetime
from email.utils import format_datetime
from html import escape
from pathlib import Path

HERE = Path(__file__).parent
BASE = "http://corpus.test"

CHROME = json.loads((HERE / "chrome.json").read_text("utf-8"))  # per page language


def links(prefix: str, names: list[str], around: str = "{}", sep: str = "") -> str:
    return sep.join(around.format(f"<a href='/{prefix}/{i}'>{escape(n)}</a>")
                    for i, n in enumerate(names))


def semantic(site: dict, art: dict, c: dict) -> str:
    paras = "".join(f"<p>{escape(p)}</p>" for p in art["paragraphs"])
    return (f"<header><div class='logo'>{escape(site['title'])}</div><nav><ul>"
            + links("s", c["nav"], "<li>{}</li>")
            + "</ul></nav></header><main><article>"
            f"<h1>{escape(art['title'])}</h1>"
            f"<div class='byline'><time>{art['published'][:16]}</time></div>"
            f"<div class='share'>{escape(c['share'])}</div>{paras}</article>"
            f"<aside><h2>{escape(c['related'])}</h2><ul>"
            + links("r", c["others"], "<li>{}</li>")
            + "</ul></aside></main>"
            f"<section class='comments'><h3>{escape(c['comments'])}</h3>"
            + "".join(f"<div class='comment'><p>{escape(t)}</p></div>" for t in c["comment_texts"])
            + f"</section><div class='cookie'>{escape(c['cookie'])}</div>"
            f"<footer><p>{escape(c['footer'])}</p></footer>")


def divsoup(site: dict, art: dict, c: dict) -> str:
    paras = "".join(f"<div class='txt'>{escape(p)}</div><br>" for p in art["paragraphs"])
    return ("<div id='top'><div class='menu'>"
            + links("m", c["nav"], sep=" | ")
            + f"</div><div class='ad'>ADVERTISEMENT</div></div><div id='wrap'><div class='left'>"
            f"<div class='ttl'>{escape(art['title'])}</div>"
            f"<div class='meta'>{escape(site['title'])}"
            f" {art['published'][:10]}</div><div class='content-body'>{paras}</div>"
            f"<div class='tools'>{escape(c['share'])}</div></div><div class='right'>"
            f"<div class='box'><b>{escape(c['related'])}</b>"
            + "".join(f"<div class='item'><a href='/r/{i}'>{escape(o)}</a></div>"
                      for i, o in enumerate(c["others"]))
            + f"</div><div class='box'>{escape(c['cookie'])}</div></div></div>"
            f"<div id='cmt'><b>{escape(c['comments'])}</b>"
            + "".join(f"<div class='c'>{escape(t)}</div>" for t in c["comment_texts"])
            + f"</div><div id='foot'>{escape(c['footer'])}</div>")


def inline(site: dict, art: dict, c: dict) -> str:
    body = []
    for i, p in enumerate(art["paragraphs"]):
        body.append(f"<p>{escape(p)}</p>")
        if i == 1:  # a related-headlines box in the middle of the text
            body.append(f"<div class='inline-related'><strong>{escape(c['related'])}</strong><ul>"
                        + "".join(f"<li><a href='/r/{j}'>{escape(o)}</a></li>"
                                  for j, o in enumerate(c["others"])) + "</ul></div>")
    return (f"<div class='site-header'><span>{escape(site['title'])}</span>"
            + "".join(f"<a href='/c/{i}'>{escape(n)}</a>" for i, n in enumerate(c["nav"]))
            + f"</div><div class='post'><h1 class='headline'>{escape(art['title'])}</h1>"
            f"<p class='dek'><em>{escape(art['teaser'])}</em></p>"
            f"<div class='post-body'>{''.join(body)}</div></div>"
            f"<div class='newsletter'><p>{escape(c['cookie'])}</p></div>"
            f"<div class='site-footer'><p>{escape(c['footer'])}</p>"
            f"<p>{escape(c['footer'])}</p></div>")


def table(site: dict, art: dict, c: dict) -> str:
    paras = "".join(f"<p><font size='3'>{escape(p)}</font></p>" for p in art["paragraphs"])
    return ("<table width='100%'><tr><td colspan='2'>"
            + "&nbsp;".join(f"<a href='/t/{i}'>{escape(n)}</a>" for i, n in enumerate(c["nav"]))
            + "</td></tr><tr><td width='70%' valign='top'>"
            f"<h2>{escape(art['title'])}</h2><font color='gray'>{art['published'][:10]}</font>"
            f"{paras}<p>{escape(c['share'])}</p></td>"
            f"<td valign='top'><b>{escape(c['related'])}</b><br>"
            + links("r", c["others"], sep="<br>")
            + f"</td></tr><tr><td colspan='2'><font size='1'>{escape(c['footer'])}</font>"
            "</td></tr></table>")


LAYOUTS = {"semantic": semantic, "divsoup": divsoup, "inline": inline, "table": table}


def page(site: dict, art: dict) -> str:
    c = CHROME[site["language"]]
    lang = {"zh-TW": "zh-Hant", "zh-CN": "zh-Hans"}.get(site["language"], "en")
    return (f"<!DOCTYPE html><html lang='{lang}'><head><meta charset='utf-8'>"
            f"<title>{escape(art['title'])} - {escape(site['title'])}</title>"
            "<script>window.dataLayer=[];function track(){}</script>"
            "<style>body{font-family:sans-serif}</style></head><body>"
            + LAYOUTS[site["template"]](site, art, c) + "</body></html>\n")


def feed(site: dict, arts: list[dict]) -> str:
    items = "".join(
        f"<item><title>{escape(a['title'])}</title><link>{BASE}{a['path']}</link>"
        f"<guid>{BASE}{a['path']}</guid><description>{escape(a['teaser'])}</description>"
        f"<pubDate>{format_datetime(datetime.fromisoformat(a['published']))}</pubDate></item>"
        for a in sorted(arts, key=lambda a: a["published"], reverse=True))
    return ('<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
            f"<title>{escape(site['title'])}</title><link>{BASE}/</link>"
            f"<language>{site['language']}</language>{items}</channel></rss>\n")


def main() -> None:
    corpus = json.loads((HERE / "stories.json").read_text("utf-8"))
    by_site: dict[str, list[dict]] = {}
    for story in corpus["stories"]:
        for art in story["articles"]:
            site = corpus["sites"][art["site"]]
            out = HERE / "pages" / art["path"].lstrip("/")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(page(site, art), "utf-8")
            by_site.setdefault(art["site"], []).append(art)
    (HERE / "feeds").mkdir(exist_ok=True)
    for name, arts in by_site.items():
        (HERE / "feeds" / f"{name}.xml").write_text(feed(corpus["sites"][name], arts), "utf-8")


if __name__ == "__main__":
    main()
