"""How well a judge agrees with labelled rows: the user's own (`quality --data`) or the
built-in dev sets. Every row's verdict runs through the batching scheduler; the judge and
trivial baselines are measured on the same rows.

A row holds what its task (`VerdictTask`, declared by each scorer) reads: a hallucination
row `context` (a list or one string), `claim` and `label` (true = hallucinated); a
toxicity or rubric row `text`, optional `input` and `label` (true = toxic, or the rubric's
first verdict). Any row may carry `group` (a slice name). A row that cannot be read is
that row's error: counted and reported, never judged, never fatal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from localjudge.errors import LocalJudgeError
from localjudge.quality.devsets import load_devset
from localjudge.quality.intervals import RESAMPLES, Intervals, intervals
from localjudge.scorers.evidence import context_text
from localjudge.scorers.reasons import why_dropped
from localjudge.scorers.task import LabelledRow, VerdictTask
from localjudge.scorers.text import split_statements

VERDICT_TOKENS = 64  # budget of one verdict (the reason is closed within it)
Row = LabelledRow  # a verdict row
STATEMENTS_SHAPE = "each text judged statement by statement (flagged when any is)"


def statements_shape(left_out: str = "") -> str:
    """How a report's texts were judged, statement by statement, and what the task's
    sentence extraction left out of them (`VerdictTask.leaves_out`)."""
    return STATEMENTS_SHAPE + (f", {left_out} left out" if left_out else "")


class DataError(LocalJudgeError):
    """A labelled file that cannot be used at all (missing, empty, no readable row), or a
    task no registered scorer declares."""


@dataclass(frozen=True)
class RowError:
    number: int
    message: str


def as_task(task: VerdictTask | str) -> VerdictTask:
    """A task by a registered scorer's name (or "rubric:FILE"), or the task itself."""
    if isinstance(task, VerdictTask):
        return task
    from localjudge.scorers import verdict_task

    try:
        return verdict_task(task)
    except ValueError as error:
        raise DataError(str(error)) from None


def prompt_version(task: VerdictTask | str) -> str:
    """The version of the verdict prompt a task's rows are judged with (calibrations are
    stored per version: a new prompt needs a new threshold)."""
    return as_task(task).prompt_version


def row_of(record: Any, number: int, task: VerdictTask | str) -> Row:
    """A checked row; ValueError says what is wrong with it."""
    return as_task(task).read_row(record, number)


def devset_rows(task: VerdictTask | str) -> list[Row]:
    """The built-in dev set of a task as rows (its records name the text by the task's
    field or `statement`, the label by `expected`, the group by `category` or `kind`)."""
    task = as_task(task)
    if task.devset is None:
        raise DataError(f"{task.name} has no built-in dev set; give --data")
    rows = []
    for number, case in enumerate(load_devset(task.devset), start=1):
        record = {
            **case,
            "label": case["expected"] == task.flagged,
            task.text_field: case.get(task.text_field, case.get("statement")),
            "group": case.get("category", case.get("kind")),
        }
        rows.append(task.read_row(record, number))
    return rows


# -- the judge's verdicts --------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The judge on one row: P(yes) from the verdict's choice point, or why it failed."""

    p_yes: float | None
    reason: str = ""
    error: str | None = None


def prompts_of(
    judge,
    row: Row,
    task: VerdictTask | str,
    *,
    windows=None,
    window_tokens: int | None = None,
    gather: bool = False,
) -> list[tuple]:
    """The verdict prompts of one row, each with the window it judges against (None without
    windows): a windowed task's text against each of its evidence windows, best first (one,
    the whole context, when it fits; as the hallucination scorer judges it), else one
    prompt. `windows` (k, "all" or "off") and `window_tokens`: the scorer's options;
    `gather`: also against the window of the text's own best sentences (`plan_windows`)."""
    task = as_task(task)
    if not task.windowed or not row.context:
        return [(task.prompt(row), None)]
    from localjudge.scorers.evidence import DEFAULT_TOP_K, claim_contexts, plan_windows

    cut, (chosen,), _ = plan_windows(
        judge, row.context, [row.text], mode=DEFAULT_TOP_K if windows is None else windows,
        window_tokens=window_tokens, max_tokens=VERDICT_TOKENS, gather=gather,
    )  # fmt: skip
    texts = claim_contexts(row.context, cut, chosen)
    picked = [cut[w] for w in chosen] or [None]
    return [
        (task.prompt(replace(row, context=tuple(text))), window)
        for text, window in zip(texts, picked, strict=True)
    ]


def judge_rows(
    judge,
    rows: list[Row],
    task: VerdictTask | str,
    *,
    chunk: int = 256,
    progress: Callable[[int], None] | None = None,
    reasons: bool = True,
    statements: bool = False,
    windows=None,
    window_tokens: int | None = None,
    gather: bool = False,
) -> list[Verdict]:
    """The judge's verdict on every row, `chunk` rows in flight at a time (the scheduler
    batches them); `progress(n)` after each chunk. A row judged in evidence windows takes
    the verdict of the window that clears it most (the lowest P(flagged)). With
    `statements`, each statement of a row's text (`statements_of`, the scorer's sentence
    extraction) is judged on its own and the row takes the verdict of its most flagged
    statement: a text is flagged when any of its statements is, and a text in which the
    task finds nothing to check (a task whose `statements` leaves sentences out) is not
    flagged, P(flagged) 0, as a scorer scores an output without claims. Reasons are the
    judge's own words where its free text can be trusted, else (and where the scorers would
    drop its words: `why_dropped`) built from the verdict and its evidence, as the scorers
    build them; `reasons=False` stops each reply after its verdict (P(flagged) is the
    same; the reason is a placeholder), which is much faster.
    `windows`: the scorer's option (k, "all" or "off"; default its top-k); `window_tokens`
    and `gather`: as `prompts_of`'s."""
    task = as_task(task)
    written = reasons and judge.writes_reasons
    reasons_for = None if written else frozenset()
    verdicts: list[Verdict] = []
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        texts = [statements_of(row.text, task) if statements else [row.text] for row in part]
        owners, judged_in, requests = [], [], []
        for n, row in enumerate(part):
            for m, text in enumerate(texts[n]):
                each = prompts_of(
                    judge, replace(row, text=text), task, windows=windows,
                    window_tokens=window_tokens, gather=gather,
                )  # fmt: skip
                for parts, window in each:
                    owners.append((n, m))
                    judged_in.append((window, parts))
                    requests.append(
                        judge.prompt_request(
                            parts, task.schema, VERDICT_TOKENS, reasons_for=reasons_for
                        )
                    )
        outcomes: list[list[list]] = [[[] for _ in mine] for mine in texts]
        for (n, m), (window, parts), outcome in zip(
            owners, judged_in, judge.generate_many(requests), strict=True
        ):
            outcomes[n][m].append((outcome, window, parts))
        for row, mine, said in zip(part, outcomes, texts, strict=True):
            if not said:
                verdicts.append(Verdict(0.0, reason=NOTHING_TO_CHECK if reasons else ""))
                continue
            failed = next((o for each in mine for o, *_ in each if isinstance(o, Exception)), None)
            if failed is not None:
                verdicts.append(Verdict(None, error=f"{type(failed).__name__}: {failed}"))
                continue
            # each statement's deciding window, then the row's most flagged statement
            decided = [min(each, key=lambda judged: task.p_flagged(judged[0])) for each in mine]
            m = max(range(len(decided)), key=lambda i: task.p_flagged(decided[i][0]))
            best, window, parts = decided[m]
            p = task.p_flagged(best)
            reason = str(best.value.get("reason", ""))  # with reasons=False, a placeholder
            context = context_text(row.context) if row.context else None
            if reasons and (not written or why_dropped(reason, parts, context)):
                # built, as the scorers build it, also where the scorers drop the judge's
                reason = task.reason(best.value, window.evidence(p) if window else None)
            if len(said) > 1 and reasons:
                reason = f'statement {m + 1} of {len(said)}, "{said[m]}": {reason}'
            verdicts.append(Verdict(p, reason=reason))
        if progress is not None:
            progress(len(part))
    return verdicts


NOTHING_TO_CHECK = "states nothing to check"


def statements_of(text: str, task: VerdictTask | str) -> list[str]:
    """The statements a text is judged in, statement by statement, as the task's scorer
    cuts an output without the judge (`VerdictTask.statements`): none when every sentence
    states nothing to check, the whole text when it has no sentences at all."""
    found = as_task(task).statements(text)
    return found if found or split_statements(text) else [text]


# -- agreement -------------------------------------------------------------------------------


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def auroc(labels: list[bool], scores: list[float]) -> float | None:
    """Area under the ROC curve (ties count half); None without both classes."""
    positives = sum(labels)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return None
    positive_ranks = sum(r for r, label in zip(ranks(scores), labels, strict=True) if label)
    return (positive_ranks - positives * (positives + 1) / 2) / (positives * negatives)


def reliability(labels: list[bool], scores: list[float], bins: int = 10) -> list[dict]:
    """Per bin of P(yes): rows, mean P(yes), fraction labelled yes (empty bins left out)."""
    cells: list[list[int]] = [[] for _ in range(bins)]
    for i, score in enumerate(scores):
        cells[min(int(score * bins), bins - 1)].append(i)
    out = []
    for b, members in enumerate(cells):
        if members:
            out.append(
                {
                    "bin": [b / bins, (b + 1) / bins],
                    "n": len(members),
                    "confidence": sum(scores[i] for i in members) / len(members),
                    "observed": sum(labels[i] for i in members) / len(members),
                }
            )
    return out


def expected_calibration_error(labels: list[bool], scores: list[float], bins: int = 10) -> float:
    n = len(scores)
    return sum(
        c["n"] / n * abs(c["confidence"] - c["observed"]) for c in reliability(labels, scores, bins)
    )


def roc_curve(labels: list[bool], scores: list[float]) -> list[tuple[float, float]]:
    """(false-positive rate, true-positive rate) points, threshold from high to low."""
    positives = sum(labels) or 1
    negatives = (len(labels) - sum(labels)) or 1
    points = [(0.0, 0.0)]
    tp = fp = 0
    ranked = sorted(zip(scores, labels, strict=True), key=lambda p: -p[0])
    for i, (score, label) in enumerate(ranked):
        tp += label
        fp += not label
        if i + 1 == len(ranked) or ranked[i + 1][0] != score:
            points.append((fp / negatives, tp / positives))
    return points


@dataclass
class Agreement:
    """Agreement of one way of judging with the labels, "yes" being the positive class."""

    n: int
    accuracy: float
    balanced_accuracy: (
        float  # mean of the true-positive and true-negative rates (of the classes present)
    )
    f1: float
    false_positive_rate: float
    auroc: float | None  # from the scores; None without both classes
    ece: float  # expected calibration error of the scores, 10 bins
    confusion: dict[str, int]  # tp, fp, tn, fn

    @classmethod
    def of(cls, labels: list[bool], predictions: list[bool], scores: list[float]) -> Agreement:
        pairs = list(zip(labels, predictions, strict=True))
        tp = sum(e and p for e, p in pairs)
        tn = sum(not e and not p for e, p in pairs)
        fp = sum(not e and p for e, p in pairs)
        fn = sum(e and not p for e, p in pairs)
        tpr = tp / (tp + fn) if tp + fn else 0.0
        tnr = tn / (tn + fp) if tn + fp else 0.0
        precision = tp / (tp + fp) if tp + fp else 0.0
        rates = [r for r, seen in ((tpr, tp + fn), (tnr, tn + fp)) if seen]  # classes present
        return cls(
            n=len(pairs),
            accuracy=(tp + tn) / len(pairs) if pairs else 0.0,
            balanced_accuracy=sum(rates) / len(rates) if rates else 0.0,
            f1=2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0,
            false_positive_rate=fp / (fp + tn) if fp + tn else 0.0,
            auroc=auroc(labels, scores),
            ece=expected_calibration_error(labels, scores) if pairs else 0.0,
            confusion={"tp": tp, "fp": fp, "tn": tn, "fn": fn},
        )


@dataclass
class Way:
    """One way of judging the rows: its scores (P(yes)) and verdicts."""

    name: str
    scores: list[float]
    predictions: list[bool]


def baselines(task: VerdictTask | str, rows: list[Row], *, statements: bool = False) -> list[Way]:
    """Trivial baselines on the same rows: the majority class, and the task's word rules
    (with `statements`, in the judge's shape: a rule flags a row when it flags any of the
    row's statements)."""
    base_rate = sum(r.label for r in rows) / len(rows)
    majority = base_rate >= 0.5
    ways = [Way("majority class", [base_rate] * len(rows), [majority] * len(rows))]
    for baseline in as_task(task).baselines:
        predicted = [
            any(baseline.flags(text, r.context) for text in statements_of(r.text, task))
            if statements
            else baseline.flags(r.text, r.context)
            for r in rows
        ]
        ways.append(Way(baseline.name, [float(p) for p in predicted], predicted))
    return ways


@dataclass
class QualityReport:
    """A judge against labelled rows, beside trivial baselines, on the same rows."""

    task: str
    source: str  # the file, or "dev set"
    model: str
    rows: list[Row]  # the rows the judge answered
    ways: list[Way]  # the judge first, then the baselines
    threshold: float  # P(yes) at or above which the judge says yes
    threshold_source: str = "default"  # "default", "given" or where a calibration came from
    bad_rows: list[RowError] = field(default_factory=list)
    judge_errors: list[tuple[Row, str]] = field(default_factory=list)
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)  # the judge's reason per row
    flagged: str = "yes"  # the verdict a true label stands for
    resamples: int = RESAMPLES  # bootstrap resamples behind the intervals (0: none)
    statements: bool = False  # each text judged statement by statement (`judge_rows`)
    left_out: str = ""  # what the statements leave out of each text (`VerdictTask.leaves_out`)
    # a windowed task's evidence windows: judged per row (k, "all" or "off") and their size
    # in tokens (None: as long as fits); None for a task judged without a context's windows
    windows: str | int | None = None
    window_tokens: int | None = None

    @property
    def rows_per_second(self) -> float:
        judged = len(self.rows) + len(self.judge_errors)
        return judged / self.seconds if self.seconds > 0 else 0.0

    def agreement(self) -> dict[str, Agreement]:
        labels = [r.label for r in self.rows]
        return {w.name: Agreement.of(labels, w.predictions, w.scores) for w in self.ways}

    @cached_property
    def intervals(self) -> Intervals | None:
        """Bootstrap intervals of each way's balanced accuracy and AUROC, and of the judge's
        difference from each baseline; None without both classes or resamples (worked out
        once: the console, JSON and page show the same)."""
        labels = [r.label for r in self.rows]
        ways = [(w.name, w.scores, w.predictions) for w in self.ways]
        return intervals(labels, ways, resamples=self.resamples)

    def by_group(self) -> dict[str, dict[str, Agreement]]:
        groups: dict[str, list[int]] = {}
        for i, row in enumerate(self.rows):
            if row.group is not None:
                groups.setdefault(row.group, []).append(i)
        out = {}
        for name, members in sorted(groups.items()):
            labels = [self.rows[i].label for i in members]
            out[name] = {
                w.name: Agreement.of(
                    labels, [w.predictions[i] for i in members], [w.scores[i] for i in members]
                )
                for w in self.ways
            }
        return out

    def worst(self, n: int = 10) -> list[dict]:
        """The judge's most confident wrong verdicts, with their texts."""
        judge = self.ways[0]
        wrong = [i for i, row in enumerate(self.rows) if judge.predictions[i] != row.label]
        wrong.sort(key=lambda i: -abs(judge.scores[i] - self.threshold))
        out = []
        for i in wrong[:n]:
            row = self.rows[i]
            out.append(
                {
                    "row": row.number,
                    "label": row.label,
                    "p_yes": judge.scores[i],
                    "text": row.text,
                    "context": list(row.context) if row.context else row.input,
                    "group": row.group,
                    "reason": self.reasons[i] if i < len(self.reasons) else "",
                }
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "task": self.task,
            "source": self.source,
            "model": self.model,
            "rows": len(self.rows),
            "threshold": self.threshold,
            "flagged": self.flagged,
            "threshold_source": self.threshold_source,
            "statements": self.statements,
            **({"statements_left_out": self.left_out} if self.left_out else {}),
            **(
                {"windows": self.windows, "window_tokens": self.window_tokens}
                if self.windows is not None
                else {}
            ),
            "bad_rows": [asdict(e) for e in self.bad_rows],
            "judge_errors": [{"row": r.number, "error": e} for r, e in self.judge_errors],
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows_per_second, 3),
            "agreement": {k: asdict(v) for k, v in self.agreement().items()},
            "intervals": spread.to_dict() if (spread := self.intervals) else None,
            "groups": {
                g: {k: asdict(v) for k, v in ways.items()} for g, ways in self.by_group().items()
            },
            "worst": self.worst(),
        }


def measure(
    judge,
    rows: list[Row],
    task: VerdictTask | str,
    *,
    source: str,
    bad_rows: list[RowError] | None = None,
    threshold: float = 0.5,
    threshold_source: str = "default",
    progress: Callable[[int], None] | None = None,
    reasons: bool = True,
    resamples: int = RESAMPLES,
    statements: bool = False,
    windows=None,
    window_tokens: int | None = None,
    gather: bool = False,
) -> QualityReport:
    """Judge every row and compare with the labels and the baselines on the same rows
    (with `resamples` bootstrap resamples behind the intervals; 0 for none). With
    `statements`, each text is judged statement by statement, as the hallucination scorer
    judges an output, and the baselines in the same shape (`judge_rows`, `baselines`).
    `windows` and `window_tokens`: as the scorer's options (default its top-k and the
    judge's own size); `gather`: as `prompts_of`'s."""
    task = as_task(task)
    started = time.perf_counter()
    verdicts = judge_rows(
        judge, rows, task, progress=progress, reasons=reasons, statements=statements,
        windows=windows, window_tokens=window_tokens, gather=gather,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    answered = [(r, v) for r, v in zip(rows, verdicts, strict=True) if v.p_yes is not None]
    failed = [(r, v.error or "") for r, v in zip(rows, verdicts, strict=True) if v.p_yes is None]
    if not answered:
        raise DataError(f"the judge answered none of {len(rows)} rows; first error: {failed[0][1]}")
    kept = [r for r, _ in answered]
    read, size = windows_read(judge, task, windows, window_tokens)
    scores = [v.p_yes for _, v in answered]
    judge_way = Way("judge", scores, [s >= threshold for s in scores])
    return QualityReport(
        task=task.name,
        source=source,
        model=judge.name,
        rows=kept,
        ways=[judge_way, *baselines(task, kept, statements=statements)],
        threshold=threshold,
        threshold_source=threshold_source,
        bad_rows=list(bad_rows or []),
        judge_errors=failed,
        seconds=seconds,
        reasons=[v.reason for _, v in answered],
        flagged=task.flagged,
        resamples=resamples,
        statements=statements,
        left_out=task.leaves_out if statements else "",
        windows=read,
        window_tokens=size,
    )


def left_out_lines(
    bad_rows: list[RowError], failed: list[tuple[int, str]], failed_what: str
) -> list[str]:
    """Report lines for the rows left out: unreadable ones, and those that failed."""
    lines = []
    if bad_rows:
        first = bad_rows[0]
        lines.append(
            f"  {len(bad_rows)} unreadable rows left out (first: row {first.number}: {first.message})"
        )
    if failed:
        number, error = failed[0]
        lines.append(f"  {len(failed)} {failed_what} left out (first: row {number}: {error})")
    return lines


def _finite(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def interval_lines(spread: Intervals | None) -> list[str]:
    """The judge's intervals and its differences from the baselines, for the console."""
    if spread is None:
        return []
    judge = next(iter(spread.ways.values()))
    share = f"{spread.level:.0%}"
    lines = [
        f"  judge, {share} intervals ({spread.resamples} stratified bootstrap resamples): "
        f"balanced accuracy {judge.balanced_accuracy:.2f}, AUROC {judge.auroc:.2f}"
    ]
    for name, d in spread.differences.items():
        lines.append(
            f"  judge minus {name}: balanced accuracy {d.balanced_accuracy:+.2f}, "
            f"AUROC {d.auroc:+.2f}"
        )
    for name, d in spread.differences.items():
        if d.balanced_accuracy.high < 0:
            lines.append(f"  on these rows the judge's verdicts are surely worse than {name}'s")
        elif d.balanced_accuracy.low <= 0:
            lines.append(
                f"  on these rows the judge's verdicts are not surely better than {name}'s"
            )
    return lines


def windows_read(
    judge, task: VerdictTask, windows=None, window_tokens: int | None = None
) -> tuple[str | int | None, int | None]:
    """How a windowed task's rows are read, as a report names it: the scorer's options with
    their defaults filled in (its top-k, the judge's window size); (None, None) for a task
    judged without a context's windows."""
    from localjudge.scorers.evidence import DEFAULT_TOP_K

    if not task.windowed:
        return None, None
    return (DEFAULT_TOP_K if windows is None else windows), (window_tokens or judge.window_tokens)


def windows_shape(windows: str | int, window_tokens: int | None) -> str:
    """How a report's long contexts were read, in words."""
    from localjudge.scorers.evidence import MAX_WINDOWS

    if windows == "off":
        return "each context judged whole"
    size = f"{window_tokens}-token" if window_tokens else "context-sized"
    judged = (
        f"every window (at most {MAX_WINDOWS})"
        if windows == "all"
        else f"the {windows} best by BM25"
    )
    return f"long contexts in {size} evidence windows, {judged}"


def report_text(report: QualityReport) -> str:
    """The report as a console table."""
    lines = [
        f"{report.task} on {report.source}: {len(report.rows)} rows judged by {report.model} "
        f"({report.rows_per_second:.1f} rows/s), {report.flagged} when P({report.flagged}) >= "
        f"{report.threshold:.2f} "
        f"({report.threshold_source})"
        + (f", {statements_shape(report.left_out)}" if report.statements else "")
        + (f", {windows_shape(report.windows, report.window_tokens)}" if report.windows else "")
    ]
    lines += left_out_lines(
        report.bad_rows,
        [(row.number, error) for row, error in report.judge_errors],
        "rows the judge could not answer",
    )
    header = (
        f"  {'':24} {'accuracy':>9} {'balanced':>9} {'F1':>6} {'FPR':>6} {'AUROC':>6} {'ECE':>6}"
    )
    lines.append(header)
    agreement = report.agreement()
    for name, a in agreement.items():
        lines.append(
            f"  {name:24} {a.accuracy:9.2f} {a.balanced_accuracy:9.2f} {a.f1:6.2f} "
            f"{a.false_positive_rate:6.2f} {_finite(a.auroc):>6} {a.ece:6.2f}"
        )
    c = agreement["judge"].confusion
    lines.append(f"  judge confusion: TP {c['tp']}  FP {c['fp']}  TN {c['tn']}  FN {c['fn']}")
    lines += interval_lines(report.intervals)
    groups = report.by_group()
    if groups:
        names = [w.name for w in report.ways]
        lines.append("  balanced accuracy by group:")
        lines.append(f"  {'group':24} {'rows':>5} " + " ".join(f"{n[:14]:>14}" for n in names))
        for group, ways in groups.items():
            n = next(iter(ways.values())).n
            cells = " ".join(f"{ways[name].balanced_accuracy:14.2f}" for name in names)
            lines.append(f"  {group[:24]:24} {n:5d} {cells}")
    return "\n".join(lines)
