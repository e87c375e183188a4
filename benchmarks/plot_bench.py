#!/usr/bin/env python3
"""Charts from one or several `packrec bench --json` files (matplotlib, Debian python3-matplotlib).

Usage: benchmarks/plot_bench.py OUT_DIR REPORT.json [REPORT.json ...]
Writes three PNGs into OUT_DIR:
  access.png  records/s by source (loose files, shard, lmdb, hdf5) x order x cache state, the best
              reader count of each; one group of bars per report
  scaling.png decode and decode+augment images/s by thread count, and random cold reads by
              number of readers (and io_uring queue depth), per source
  stages.png  each loader stage alone and the whole loader, images/s, bottleneck marked
Several reports (two machines, two disks) are drawn side by side, labelled by machine and
filesystem.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

SOURCES = ["files", "shard", "lmdb", "hdf5"]
NAMES = {"files": "loose files", "shard": "shard", "lmdb": "LMDB", "hdf5": "HDF5"}


def label(report):
    """The panel's title: the report's file (what tells two runs on one machine apart), then the
    machine, disk and date."""
    m = report["machine"]
    return (f"{report['_name']}: {m['cores']} cores, {m['data_filesystem']} "
            f"({m['data_device_kind']}), {report['started_at'][:10]}")


def compact(value):
    """12,345 -> '12.3k': short enough to sit on a bar."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def log_axis(axis):
    """A log axis with labelled ticks at 1, 2 and 5 of each decade (10k, 20k, 50k, ...)."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: compact(value)))
    axis.set_minor_formatter(FuncFormatter(lambda *_: ""))


def empty_panel(ax, report, what):
    ax.text(0.5, 0.5, f"no {what} in this report", ha="center", va="center",
            transform=ax.transAxes, fontsize=10, color="gray")
    ax.set_title(label(report), fontsize=9)
    ax.set_axis_off()  # not set_xticks([]): the axis may be shared with a panel that has figures


def best(rows, **match):
    chosen = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return max((r["records_per_s"] for r in chosen), default=0)


def plot_access(reports, out):
    combos = [(o, c) for o in ("sequential", "random") for c in ("cold", "warm")]
    # One value axis for every panel: reports side by side compare bar for bar.
    fig, axes = plt.subplots(1, len(reports), figsize=(7 * len(reports), 4.8), squeeze=False,
                             sharey=True)
    for ax, report in zip(axes[0], reports):
        sources = [s for s in SOURCES if any(r["source"] == s for r in report["access"])]
        if not sources:
            empty_panel(ax, report, "access-pattern figures")
            continue
        width = 0.8 / len(combos)
        for i, (order, cache) in enumerate(combos):
            values = [best(report["access"], source=s, order=order, cache=cache, engine="threads")
                      for s in sources]
            bars = ax.bar([x + i * width for x in range(len(sources))], values, width,
                          label=f"{order}, {cache}")
            ax.bar_label(bars, labels=[compact(v) if v else "" for v in values], fontsize=6,
                         rotation=90, padding=2)
        ax.set_xticks([x + width * (len(combos) - 1) / 2 for x in range(len(sources))])
        ax.set_xticklabels([NAMES[s] for s in sources])
        ax.set_yscale("log")
        log_axis(ax.yaxis)
        ax.margins(y=0.15)
        ax.set_ylabel("records/s (best reader count, log scale)")
        ax.set_title(label(report), fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("packrec bench: read throughput by source, order and page-cache state")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "access.png"), dpi=110)
    plt.close(fig)


def plot_scaling(reports, out):
    fig, axes = plt.subplots(2, len(reports), figsize=(7 * len(reports), 8), squeeze=False,
                             sharey="row")
    for col, report in enumerate(reports):
        ax = axes[0][col]
        if not any(r["sweep"] == "threads" for r in report["stages"]):
            empty_panel(ax, report, "decode thread sweep (bench ran with --no-stages)")
        for stage in ("decode", "decode+augment"):
            rows = sorted((r["threads"], r["images_per_s"]) for r in report["stages"]
                          if r["stage"] == stage and r["sweep"] == "threads")
            if rows:
                ax.plot(*zip(*rows), marker="o", label=stage)
                for threads, rate in rows:
                    ax.annotate(compact(rate), (threads, rate), textcoords="offset points",
                                xytext=(0, 5), ha="center", fontsize=7)
        threads = sorted({r["threads"] for r in report["stages"] if r["sweep"] == "threads"})
        if threads:
            ax.set_xticks(threads)  # whole threads, not 1.2 of one
        ax.set_xlabel("decode threads")
        ax.set_ylabel("images/s")
        ax.set_title("decode thread sweep: " + label(report), fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        ax = axes[1][col]
        cache = "cold" if any(r["cache"] == "cold" for r in report["access"]) else "warm"
        for source in SOURCES:
            for engine in ("threads", "io_uring"):
                rows = sorted((r["concurrency"], r["records_per_s"]) for r in report["access"]
                              if r["source"] == source and r["order"] == "random"
                              and r["cache"] == cache and r["engine"] == engine)
                if rows:
                    ax.plot(*zip(*rows), marker="o" if engine == "threads" else "s",
                            linestyle="-" if engine == "threads" else "--",
                            label=NAMES[source] + (" (io_uring depth)" if engine == "io_uring" else ""))
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.set_xlabel("readers (or io_uring queue depth)")
        ax.set_ylabel("records/s")
        ax.set_title(f"random order, {cache} cache: the num_workers question ({report['_name']})",
                     fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scaling.png"), dpi=110)
    plt.close(fig)


def plot_stages(reports, out):
    fig, axes = plt.subplots(1, len(reports), figsize=(7 * len(reports), 4.8), squeeze=False,
                             sharex=True)
    for ax, report in zip(axes[0], reports):
        if not report["stages"]:
            empty_panel(ax, report, "loader-stage figures (bench ran with --no-stages)")
            continue
        top = max((r["threads"] for r in report["stages"] if r["stage"] == "decode+augment"),
                  default=1)
        names, values = [], []
        cold = [r for r in report["access"] if r["path"] == report["stage_source"]
                and r["order"] == "random" and r["cache"] == "cold"]
        if cold:
            names.append("storage (cold random)")
            values.append(max(r["records_per_s"] for r in cold))
        for stage in ("read", "decode", "augment", "decode+augment", "collate", "upload",
                      "pipeline", "pipeline+upload"):
            rows = [r for r in report["stages"] if r["stage"] == stage and r["sweep"] in ("", "threads")
                    and (r["sweep"] == "" or r["threads"] == top)]
            if rows:
                names.append(stage)
                values.append(rows[0]["images_per_s"])
        bottleneck = report["bottleneck"]
        colors = ["tab:red" if n.split(" ")[0] == bottleneck else
                  "tab:green" if n.startswith("pipeline") else "tab:blue" for n in names]
        bars = ax.barh(names, values, color=colors)
        ax.bar_label(bars, labels=[compact(v) for v in values], fontsize=7, padding=2)
        ax.set_xscale("log")
        log_axis(ax.xaxis)
        ax.margins(x=0.15)
        ax.invert_yaxis()
        ax.set_xlabel("images/s (log scale); red: the bottleneck, green: all stages together")
        rate = report["starvation"]["consumer_images_per_s"] if report["starvation"] else None
        if rate:
            ax.axvline(rate, color="black", linestyle=":", label=f"consumer {rate:,.0f} images/s")
            ax.legend(fontsize=8)
        ax.set_title(f"loader stages at {top} threads: " + label(report), fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "stages.png"), dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    reports = []
    for path in sys.argv[2:]:
        with open(path) as f:
            report = json.load(f)
        if report.get("schema") != "packrec-bench/1":
            print(f"{path}: not a packrec bench report (schema {report.get('schema')!r})")
            return 1
        report["_name"] = os.path.splitext(os.path.basename(path))[0]
        reports.append(report)
    # Two files of one name (a/bench.json, b/bench.json) get their folder too.
    names = [r["_name"] for r in reports]
    for report, path in zip(reports, sys.argv[2:]):
        if names.count(report["_name"]) > 1:
            report["_name"] = os.path.relpath(path)
    plot_access(reports, out)
    plot_scaling(reports, out)
    plot_stages(reports, out)
    print(f"wrote access.png, scaling.png, stages.png to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
