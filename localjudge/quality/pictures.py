"""Pictures and a page for quality reports: the ROC curve and the reliability diagram of the
judge beside the baselines (matplotlib, the `report` extra), and one self-contained HTML page
with the tables, the pictures and the worst disagreements."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from localjudge.errors import LocalJudgeError
from localjudge.quality.labelled import QualityReport, reliability, roc_curve, statements_shape

JUDGE_COLOUR = "#1f77b4"  # the judge's lines; the browser test looks for this colour
BASELINE_COLOURS = ("#ff7f0e", "#2ca02c", "#9467bd")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise LocalJudgeError(
            "pictures need matplotlib: pip install 'localjudge[report]'"
        ) from None
    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt

    return plt


def figure_png(reports: list[QualityReport]) -> bytes:
    """One PNG: per report, its ROC curve and its reliability diagram."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(reports), 2, figsize=(11, 4.6 * len(reports)), squeeze=False)
    for (roc_ax, cal_ax), report in zip(axes, reports, strict=True):
        labels = [r.label for r in report.rows]
        agreement = report.agreement()
        colours = (JUDGE_COLOUR, *BASELINE_COLOURS)
        for way, colour in zip(report.ways, colours, strict=False):
            points = roc_curve(labels, way.scores)
            area = agreement[way.name].auroc
            name = f"{way.name} (AUROC {area:.2f})" if area is not None else way.name
            roc_ax.plot(
                [p[0] for p in points], [p[1] for p in points], color=colour, lw=2, label=name
            )
        roc_ax.plot([0, 1], [0, 1], color="#999999", ls=":", lw=1)
        roc_ax.set(
            xlabel="false-positive rate",
            ylabel="true-positive rate",
            title=f"{report.task}: ROC ({len(report.rows)} rows)",
            xlim=(0, 1),
            ylim=(0, 1.02),
        )
        roc_ax.legend(loc="lower right", fontsize=8)
        for way, colour in zip(report.ways, colours, strict=False):
            if way.name == "majority class":
                continue  # one constant score: a single point, nothing to read
            cells = reliability(labels, way.scores)
            ece = agreement[way.name].ece
            cal_ax.plot(
                [c["confidence"] for c in cells],
                [c["observed"] for c in cells],
                marker="o",
                color=colour,
                lw=2,
                label=f"{way.name} (ECE {ece:.2f})",
            )
        cal_ax.plot([0, 1], [0, 1], color="#999999", ls=":", lw=1)
        cal_ax.set(
            xlabel="P(yes) (mean per bin of 0.1)",
            ylabel="fraction labelled yes",
            title=f"{report.task}: reliability",
            xlim=(0, 1),
            ylim=(0, 1.02),
        )
        cal_ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=90)
    plt.close(fig)
    return out.getvalue()


def write_png(reports: list[QualityReport], path: str | Path) -> None:
    Path(path).write_bytes(figure_png(reports))


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    return html.escape(str(value))


def page(reports: list[QualityReport]) -> str:
    """The whole report as one HTML page; the picture is embedded, nothing is fetched."""
    picture = base64.b64encode(figure_png(reports)).decode()
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<title>localjudge quality report</title><style>",
        "body{font:14px/1.45 system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}",
        "table{border-collapse:collapse;margin:.6em 0 1.4em}td,th{border:1px solid #ccc;",
        "padding:.25em .6em;text-align:right}td:first-child,th:first-child{text-align:left}",
        ".text{text-align:left;max-width:34em}img{max-width:100%}",
        "</style></head><body><h1>How good is this judge?</h1>",
        "<p>Left: ROC curves (the judge in blue, the baselines beside it). Right: reliability; "
        "a calibrated judge lies on the dotted diagonal.</p>",
        f"<img id='pictures' alt='ROC curves and reliability diagrams' "
        f"src='data:image/png;base64,{picture}'>",
    ]
    for report in reports:
        shape = f"; {statements_shape(report.left_out)}" if report.statements else ""
        parts.append(
            f"<h2>{html.escape(report.task)} on {html.escape(report.source)}</h2>"
            f"<p>{len(report.rows)} rows judged by <b>{html.escape(report.model)}</b> at "
            f"{report.rows_per_second:.1f} rows/s; verdict yes when P(yes) &ge; "
            f"{report.threshold:.2f}{shape}. Unreadable rows left out: {len(report.bad_rows)}; "
            f"rows the judge could not answer: {len(report.judge_errors)}.</p>"
        )
        parts.append(
            "<table><tr><th>way</th><th>accuracy</th><th>balanced accuracy</th><th>F1</th>"
            "<th>false-positive rate</th><th>AUROC</th><th>ECE</th><th>TP</th><th>FP</th>"
            "<th>TN</th><th>FN</th></tr>"
        )
        for name, a in report.agreement().items():
            c = a.confusion
            cells = [a.accuracy, a.balanced_accuracy, a.f1, a.false_positive_rate, a.auroc, a.ece]
            cells += [c["tp"], c["fp"], c["tn"], c["fn"]]
            parts.append(
                f"<tr><td>{html.escape(name)}</td>"
                + "".join(f"<td>{_cell(v)}</td>" for v in cells)
                + "</tr>"
            )
        parts.append("</table>")
        parts += interval_rows(report)
        groups = report.by_group()
        if groups:
            names = [w.name for w in report.ways]
            parts.append(
                "<h3>Balanced accuracy by group</h3><table><tr><th>group</th><th>rows</th>"
                + "".join(f"<th>{html.escape(n)}</th>" for n in names)
                + "</tr>"
            )
            for group, ways in groups.items():
                n = next(iter(ways.values())).n
                parts.append(
                    f"<tr><td>{html.escape(group)}</td><td>{n}</td>"
                    + "".join(f"<td>{_cell(ways[name].balanced_accuracy)}</td>" for name in names)
                    + "</tr>"
                )
            parts.append("</table>")
        worst = report.worst()
        if worst:
            parts.append(
                "<h3>Most confident wrong verdicts</h3><table><tr><th>row</th><th>label</th>"
                "<th>P(yes)</th><th class='text'>text</th><th class='text'>context / input</th>"
                "<th class='text'>judge's reason</th></tr>"
            )
            for w in worst:
                context = w["context"]
                context = " ".join(context) if isinstance(context, list) else context
                parts.append(
                    f"<tr><td>{w['row']}</td><td>{'yes' if w['label'] else 'no'}</td>"
                    f"<td>{w['p_yes']:.2f}</td><td class='text'>{html.escape(w['text'])}</td>"
                    f"<td class='text'>{html.escape(context or '')}</td>"
                    f"<td class='text'>{html.escape(w['reason'])}</td></tr>"
                )
            parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


def interval_rows(report: QualityReport) -> list[str]:
    """The intervals of balanced accuracy and AUROC, and the judge's differences from the
    baselines, as a table (nothing without both classes)."""
    spread = report.intervals
    if spread is None:
        return []

    def cell(i) -> str:
        return f"<td>{i:.2f}</td>"

    parts = [
        f"<h3>How sure: {spread.level:.0%} intervals</h3><p>A stratified bootstrap over the "
        f"rows ({spread.resamples} resamples, seed {spread.seed}): how far the figures could "
        "move on other rows of the same kind. Differences are the judge's figure minus the "
        "baseline's on the same resampled rows.</p>",
        "<table id='intervals'><tr><th>way</th><th>balanced accuracy</th><th>AUROC</th></tr>",
    ]
    for name, w in spread.ways.items():
        parts.append(
            f"<tr><td>{html.escape(name)}</td>{cell(w.balanced_accuracy)}{cell(w.auroc)}</tr>"
        )
    for name, d in spread.differences.items():
        parts.append(
            f"<tr><td>judge minus {html.escape(name)}</td>{cell(d.balanced_accuracy)}"
            f"{cell(d.auroc)}</tr>"
        )
    parts.append("</table>")
    return parts


def write_html(reports: list[QualityReport], path: str | Path) -> None:
    Path(path).write_text(page(reports), encoding="utf-8")
