"""Article text extraction on the digest corpus: trafilatura beside readability-lxml.

``python -m bench.article_extraction``: for each page of ``bench/corpus/digest`` (whose
article text is known: the paragraphs of ``stories.json``), each extractor's text is compared
with the article's, token by token (a CJK character is a token; otherwise a word): recall (how
much of the article came out), precision (how much of what came out is the article), and the
mean CPU time per page over ``--repeat`` runs. This is how the news digest's extractor was
chosen (docs/actions.md, "Article text"); the figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus" / "digest"
_TOKEN = re.compile(r"[\u3400-\u9fff]|[^\W_\u3400-\u9fff]+")


def tokens(text: str) -> Counter[str]:
    return Counter(t.casefold() for t in _TOKEN.findall(text))


def with_trafilatura(page: str) -> str:
    import trafilatura

    return trafilatura.extract(page, include_comments=False) or ""


def with_trafilatura_recall(page: str) -> str:
    import trafilatura

    return trafilatura.extract(page, include_comments=False, include_tables=True,
                               favor_recall=True) or ""


def with_readability(page: str) -> str:
    import lxml.html
    from readability import Document

    summary = Document(page).summary(html_partial=True)
    return str(lxml.html.fromstring(summary).text_content()) if summary.strip() else ""


EXTRACTORS: dict[str, Callable[[str], str]] = {
    "trafilatura": with_trafilatura, "trafilatura recall": with_trafilatura_recall,
    "readability-lxml": with_readability}


def pages() -> list[tuple[str, str, str]]:
    """(path, html, the article's own text) of every corpus page."""
    corpus = json.loads((CORPUS / "stories.json").read_text("utf-8"))
    found = []
    for story in corpus["stories"]:
        for art in story["articles"]:
            html = (CORPUS / "pages" / art["path"].lstrip("/")).read_text("utf-8")
            found.append((art["path"], html, "\n".join(art["paragraphs"])))
    return found


def score(extracted: str, truth: str) -> tuple[float, float]:
    got, want = tokens(extracted), tokens(truth)
    common = sum((got & want).values())
    return (common / max(1, sum(want.values())), common / max(1, sum(got.values())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--per-page", action="store_true")
    args = parser.parse_args()
    corpus = pages()
    print(f"{len(corpus)} pages; recall and precision of the article's tokens, CPU ms per page")
    print(f"{'extractor':<18}{'recall':>8}{'precision':>11}{'F1':>7}{'ms/page':>9}"
          f"{'complete':>10}")
    for name, extract in EXTRACTORS.items():
        extract(corpus[0][1])  # imports and first-use set-up are not timed
        recalls, precisions = [], []
        for path, html, truth in corpus:
            recall, precision = score(extract(html), truth)
            recalls.append(recall)
            precisions.append(precision)
            if args.per_page:
                print(f"  {name:<16} {path:<50} recall {recall:.2f} precision {precision:.2f}")
        started = time.process_time()
        for _ in range(args.repeat):
            for _path, html, _truth in corpus:
                extract(html)
        ms = (time.process_time() - started) * 1000 / (args.repeat * len(corpus))
        r = sum(recalls) / len(recalls)
        p = sum(precisions) / len(precisions)
        f1 = 2 * r * p / (r + p) if r + p else 0.0
        complete = sum(1 for x in recalls if x >= 0.95)
        print(f"{name:<18}{r:>8.3f}{p:>11.3f}{f1:>7.3f}{ms:>9.2f}{complete:>6}/{len(corpus)}")


if __name__ == "__main__":
    main()
