"""The one renderer of our reports: statistics over seeds, the markdown cells and tables, and the
figures. `roformer sweep` (through plot_report.py) and every study's report script
(frontier_report, extension_report, finetune_report, scale_report) write through it, so a mean,
a spread, a table and a plot read the same everywhere.

Figures need matplotlib (the .venv of scripts/setup.sh); without it `pyplot()` says so once and
returns None, and a report still writes its markdown and JSON.
"""
import statistics
import sys


def mean_std(values):
    """Mean and sample standard deviation (0 for one value) of the values that are not None;
    (None, None) when there are none."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def cell(values, digits=2, missing="-", one_seed=None):
    """A table cell "mean ± sd" over seeds; `missing` when there is no value; a mean of 1000 or
    more as three significant digits (an exploded perplexity: its spread says nothing more); with
    `one_seed` (e.g. "(1 seed)") a single value reads "mean (1 seed)" instead of "mean ± 0.00"."""
    m, s = mean_std(values)
    if m is None:
        return missing
    if m >= 1000:
        return f"{m:.3g}"
    if one_seed is not None and len([v for v in values if v is not None]) == 1:
        return f"{m:.{digits}f} {one_seed}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def table(header, rows):
    """Markdown lines of a table: a header row, the separator, then one line per row of cells."""
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def pyplot(who="report"):
    """matplotlib.pyplot on the Agg backend, or None (with a note on stderr) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{who}: no matplotlib in {sys.executable}; skipped the plots (scripts/setup.sh)", file=sys.stderr)
        return None
    return plt


def band(ax, xs, series, label, **style):
    """The mean of each point's values as a line with markers, and ±1 sd as a shaded band; points
    without values are left out. Returns the line, or None when no point has a value."""
    points = [(x, *mean_std(v)) for x, v in zip(xs, series)]
    points = [(x, m, s) for x, m, s in points if m is not None]
    if not points:
        return None
    style.setdefault("marker", "o")
    style.setdefault("markersize", 3)
    line = ax.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)[0]
    ax.fill_between([p[0] for p in points], [p[1] - p[2] for p in points], [p[1] + p[2] for p in points],
                    alpha=0.15, color=line.get_color())
    return line


def length_axes(ax, train_len=None, yticks=None, xbase=2):
    """Evaluation length on a log-2 x axis, perplexity on a log y axis with plain tick labels
    (`yticks` where given), a grid, and a dashed line at the training length."""
    import matplotlib.ticker

    ax.set_xscale("log", base=xbase)
    ax.set_yscale("log")
    # Plain numbers on both axes (128, not 2^7; 9, not 9x10^0): lengths at the powers of the
    # base, perplexities at 1, 1.5, 2, ..., 9 x each power of ten unless `yticks` are given.
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    if yticks:
        ax.set_yticks(yticks)
    else:
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(True, which="major", alpha=0.3)
    if train_len:
        ax.axvline(train_len, color="grey", ls="--", lw=0.8)


def save(fig, path, dpi=120):
    """Lays the figure out, writes it and frees it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
