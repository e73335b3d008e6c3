"""The results as one small PNG: a panel per section, medians with min-max whiskers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.stats import Figure, Row

DPI = 80  # with the size below: about 1000 x 640 pixels, small enough to commit
SIZE_INCHES = (12.5, 8.0)


def _err(fig: Figure) -> list[list[float]]:
    return [[fig.median - min(fig.values)], [max(fig.values) - fig.median]]


def _short(system: str) -> str:
    return (system.replace("onthedot ", "").replace("PostgreSQL", "PG")
            .replace(" (Redis)", "").replace(" (PostgreSQL)", "").replace("in-process ", ""))


def _ingest(ax: Any, rows: list[Row]) -> None:
    cases = list(dict.fromkeys(r.case for r in rows))
    systems = list(dict.fromkeys(r.system for r in rows if r.figure is not None))
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        for j, case in enumerate(cases):
            row = next((r for r in rows if r.system == system and r.case == case), None)
            if row is None or row.figure is None:
                continue
            x = j + (i - (len(systems) - 1) / 2) * width
            ax.bar(x, row.figure.median, width, color=f"C{i}", yerr=_err(row.figure))
            if row.ceiling is not None:
                ax.plot([x - width / 2, x + width / 2], [row.ceiling.median] * 2, "k-", lw=1)
    ax.set_yscale("log")
    top = max([r.figure.median for r in rows if r.figure] +
              [r.ceiling.median for r in rows if r.ceiling] + [1.0])
    ax.set_ylim(top=top * 12)  # room for the legend above the tallest mark
    ax.set_xticks(range(len(cases)), [c.replace(" callers", "").replace(" caller", "")
                                      .replace("batch of ", "batch ") for c in cases],
                  fontsize=7)
    ax.set_xlabel("concurrent callers, or one batch request", fontsize=8)
    ax.set_title("ingest, jobs/s (black tick: load generator's ceiling)", fontsize=9)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(color=f"C{i}", label=_short(s)) for i, s in enumerate(systems)]
    handles.append(Line2D([], [], color="k", lw=1, label="generator ceiling"))
    ax.legend(handles=handles, fontsize=6.5, loc="upper left", ncol=2)


def _hbars(ax: Any, rows: list[Row], title: str, line: float | None = None) -> None:
    shown = [r for r in rows if r.figure is not None]
    one_case = len({r.case for r in shown}) == 1
    labels = [_short(r.system) if one_case else f"{_short(r.system)}\n{r.case}" for r in shown]
    colors = {s: f"C{i % 10}" for i, s in enumerate(dict.fromkeys(r.system for r in shown))}
    for k, row in enumerate(shown):
        assert row.figure is not None
        ax.barh(k, row.figure.median, color=colors[row.system], xerr=_err(row.figure))
        p50 = row.extra.get("p50 s") or row.extra.get("p50")
        if p50 is not None:
            ax.plot([p50.median], [k], "wo", ms=4, mec="k")
    ax.set_yticks(range(len(shown)), labels, fontsize=6.5)
    ax.invert_yaxis()
    if line is not None:
        ax.axvline(line, color="k", ls="--", lw=1)
    ax.set_title(title + (f"\n{shown[0].case}" if one_case and shown else ""), fontsize=9)


def _scan(ax: Any, rows: list[Row]) -> None:
    for i, system in enumerate(dict.fromkeys(r.system for r in rows)):
        pts = [(int(r.case.split()[0].replace(",", "")), r.figure) for r in rows
               if r.system == system and r.figure is not None]
        if not pts:
            continue
        xs = [x for x, _ in pts]
        ax.errorbar(xs, [f.median for _, f in pts], fmt="o-", color=f"C{i}",
                    yerr=[[f.median - min(f.values) for _, f in pts],
                          [max(f.values) - f.median for _, f in pts]], label=_short(system))
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("stored future runs", fontsize=8)
    ax.set_title("due-run scan, 32 shards, ms (flat is the goal)", fontsize=9)
    ax.legend(fontsize=7)


def write_chart(rows: list[Row], path: Path, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {s: [r for r in rows if r.section == s] for s in
          ("ingest", "burst", "dispatch", "scan", "rss", "crash")}
    fig, axes = plt.subplots(2, 3, figsize=SIZE_INCHES, dpi=DPI)
    panels: list[tuple[str, Callable[[Any, list[Row]], None]]] = [
        ("ingest", lambda ax, rs: _ingest(ax, rs)),
        ("burst", lambda ax, rs: _hbars(ax, rs, "burst lateness p99 s (dot: p50)")),
        ("dispatch", lambda ax, rs: _hbars(ax, rs, "all done after the due second, s "
                                           "(line: 3 s target)", line=3.0)),
        ("scan", lambda ax, rs: _scan(ax, rs)),
        ("rss", lambda ax, rs: _hbars(ax, rs, "peak RSS, MiB (line: 150 MiB target)",
                                      line=150.0)),
        ("crash", lambda ax, rs: _hbars(ax, rs, "SIGKILL -> re-executed (worker) / taken "
                                        "over (watcher), s (line: V + 1 s)",
                                        line=_crash_line(rs))),
    ]
    for ax, (section, draw) in zip(axes.flat, panels, strict=True):
        ax.tick_params(labelsize=7)
        if by[section]:
            draw(ax, by[section])
        else:
            ax.set_title(f"{section}: not run", fontsize=9)
            ax.axis("off")
    fig.suptitle(f"onthedot benchmarks — {subtitle}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _crash_line(rows: list[Row]) -> float | None:
    for row in rows:
        if "V = " in row.case:
            return float(row.case.split("V = ")[1].split()[0]) + 1.0
    return None
