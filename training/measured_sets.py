"""Make again the data folders a recipe is judged on (the ones git ignores), each as its
section of RESULTS.md made it, and check each against the saved run that judged it.

    .venv/bin/python training/measured_sets.py --sources training/sources [--only q2,ucc]

A folder is rows drawn by `make_data.py` (the same seed, so the same rows) and kept whole or
in part: Q²'s 500 rows are the last of a fold-M draw, SummEdits', UCC's, CONAN's, BUMP's and
HatemojiBuild's the held-out-sources file of a draw that holds them out, AnB-shared the
held-out rows of the sources AnB and AnT share, unseen-tox ETHOS's comments beside
ConvAbuse's test split. Each folder is then checked: every set of each saved run named for
it (under training/results/) must hold the folder's labels and groups in the same order, as
`spread.py --data` pairs them.
A folder already there that passes the check is left as it is; one made again replaces it
only once it passes. Nothing is judged: nine draws, about two minutes in all on two CPU
cores. Runs in localjudge's own virtual environment.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from make_data import ethos_rows  # noqa: E402
from spread import same_rows, saved_sets  # noqa: E402
from toxicity_threshold import jsonl  # noqa: E402

from localjudge.quality.rows import read_rows  # noqa: E402

FOLD_M = ("--scale", "1.5", "--template-weight", "0.43", "--add", "stormfront,additions,dstc9")
ANT = ("--hold-out", "begin", "--scale", "1.5", "--add", "stormfront,additions,dstc9,convabuse")
ANB = ("--template-weight", "0.43")  # AnB: AnT's recipe with the templates at AnB's weight


class SetError(Exception):
    """A folder that cannot be made as RESULTS.md made it."""


def copy(name: str, last: int | None = None) -> Callable[[Path, Path, Path], None]:
    """Keeps one file of the draw (its `last` rows only, if given)."""

    def keep(draw: Path, folder: Path, sources: Path) -> None:
        lines = (draw / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / name).write_text("".join(lines[-last:] if last else lines), encoding="utf-8")

    return keep


def whole(draw: Path, folder: Path, sources: Path) -> None:
    """Keeps the draw as it is."""
    for path in draw.iterdir():
        shutil.copy2(path, folder / path.name)


def shared(draw: Path, folder: Path, sources: Path) -> None:
    """AnB's held-out rows of the sources AnT trained on too: Davidson and ToxiGen
    (toxicity), SNLI (hallucination)."""
    for task, kept in (("toxicity", ("davidson", "toxigen")), ("hallucination", ("snli",))):
        lines = (draw / f"heldout_{task}.jsonl").read_text(encoding="utf-8").splitlines(True)
        rows = [line for line in lines if json.loads(line)["group"].split("/")[0] in kept]
        (folder / f"heldout_{task}.jsonl").write_text("".join(rows), encoding="utf-8")


def threshold(draw: Path | None, folder: Path, sources: Path) -> None:
    # every ETHOS comment as `toxicity_threshold_capped.py` writes them (its --rows)
    (folder / "ethos.jsonl").write_text(jsonl(ethos_rows(sources)), encoding="utf-8")


def unseen_tox(draw: Path, folder: Path, sources: Path) -> None:
    """ETHOS's comments, then ConvAbuse's test split as data-CA holds it out."""
    convabuse = (draw / "held-out-sources_toxicity.jsonl").read_text(encoding="utf-8")
    (folder / "held-out-sources_toxicity.jsonl").write_text(
        jsonl(ethos_rows(sources)) + convabuse, encoding="utf-8"
    )


@dataclass(frozen=True)
class Judged:
    """A set of a saved evaluate.py output that judged one file of a folder, row for row."""

    run: str  # under training/results/
    task: str
    name: str  # the set's name in the run: "held-out", "held-out sources", ...
    file: str  # in the folder


@dataclass(frozen=True)
class MeasuredSet:
    """One data folder under training/, how it is made, and which saved runs judged it."""

    folder: str  # "data-q2"
    draw: tuple[str, ...] | None  # make_data.py's arguments after --sources and --out
    keep: Callable[[Path | None, Path, Path], None]  # (draw, folder, sources): fills folder
    judged: tuple[Judged, ...]
    section: str  # the start of the title of RESULTS.md's section that made it first


def held(run: str, task: str, name: str = "held-out sources") -> Judged:
    return Judged(run, task, name, f"held-out-sources_{task}.jsonl")


def split(run: str, task: str) -> Judged:
    return Judged(run, task, "held-out", f"heldout_{task}.jsonl")


HALL, TOX = "hallucination", "toxicity"
UNSEEN = "ant/quality-AnT-unseen-tox.json"
SETS = (
    MeasuredSet("data-AnT", ANT + ("--template-weight", "1.0"), whole,
                tuple(split("ant/quality-AnT-AnT.json", t) for t in (TOX, HALL))
                + (held("ant/quality-AnT-AnT.json", HALL),),
                "The assistant-reply templates at full weight"),
    MeasuredSet("data-AnB", ANT + ANB, whole,
                tuple(split("anb/quality-AnB-AnB.json", t) for t in (TOX, HALL))
                + (held("anb/quality-AnB-AnB.json", HALL),),
                "Every source but BEGIN"),
    MeasuredSet("data-AnB-shared", ANT + ANB, shared,
                tuple(split("ant/quality-AnT-AnB-shared.json", t) for t in (TOX, HALL)),
                "Every source but BEGIN"),
    MeasuredSet("data-q2", ("--hold-out", "toxigen,begin,ethos,ucc,q2", *FOLD_M),
                copy(f"held-out-sources_{HALL}.jsonl", last=500),
                (held("ant/quality-AnT-q2.json", HALL),),
                "A second source of knowledge-grounded replies"),
    MeasuredSet("data-S-only", ("--hold-out", "summedits", "--scale", "1.2"),
                copy(f"held-out-sources_{HALL}.jsonl"),
                (held("ant/quality-AnT-S-only.json", HALL),),
                "Summaries against whole documents"),
    MeasuredSet("data-ucc", ("--hold-out", "ucc", "--upto"), copy(f"held-out-sources_{TOX}.jsonl"),
                (held("ant/quality-AnT-ucc.json", TOX),), "Brush-offs in polite words"),
    MeasuredSet("data-conan", ("--hold-out", "conan", "--upto"),
                copy(f"held-out-sources_{TOX}.jsonl"),
                (held("conan/quality-AnT-conan.json", TOX),), "Counter-speech from a source"),
    MeasuredSet("data-CA", ("--hold-out", "convabuse", "--scale", "1.2"), whole,
                (held(UNSEEN, TOX, "held-out source convabuse"),),
                "Abuse aimed at the agent: ConvAbuse"),
    MeasuredSet("data-threshold", None, threshold,
                (Judged(UNSEEN, TOX, "held-out source ethos", "ethos.jsonl"),),
                "A toxicity threshold under a false-positive cap"),
    MeasuredSet("data-unseen-tox", ("--hold-out", "convabuse", "--scale", "1.2"), unseen_tox,
                (held(UNSEEN, TOX),), "Fold M again, read on the two toxicity sources"),
    MeasuredSet("data-bump-only", ("--hold-out", "bump", "--scale", "1.2"),
                copy(f"held-out-sources_{HALL}.jsonl"),
                (held("bump/quality-merged-bump.json", HALL),),
                "News summaries against whole articles"),
    MeasuredSet("data-hatemoji", ("--hold-out", "hatemoji"),
                copy(f"held-out-sources_{TOX}.jsonl"),
                (held("anh/quality-shipped-hatemoji.json", TOX),
                 held("anh/quality-AnH-hatemoji.json", TOX)),
                "People's adversarial statements and their perturbations"),
)  # fmt: skip


def check(measured: MeasuredSet, folder: Path, results: Path) -> None:
    """Raises unless each saved set named for `measured` holds the labels and groups of its
    file of `folder`, in the same order."""
    for judged in measured.judged:
        run = results / judged.run
        entry = saved_sets(run).get((judged.task, judged.name)) if run.is_file() else None
        if entry is None:
            raise SetError(f"{run}: no saved set {judged.task}/{judged.name}")
        path, shown = folder / judged.file, f"{measured.folder}/{judged.file}"
        if not path.is_file():
            raise SetError(f"{shown}: not there")
        rows = read_rows(path, judged.task)[0]
        if not same_rows(entry, [r.label for r in rows], [r.group for r in rows]):
            raise SetError(f"{shown}: not the rows {judged.run} judged as {judged.name}")


def make(measured: MeasuredSet, sources: Path, draws: dict, scratch: Path) -> Path:
    """The folder made in `scratch`, drawing once per distinct draw (`draws` keeps them)."""
    draw = None
    if measured.draw is not None:
        if measured.draw not in draws:
            out = scratch / f"draw-{len(draws)}"
            command = [sys.executable, str(HERE / "make_data.py"), "--sources", str(sources),
                       "--out", str(out), *measured.draw]  # fmt: skip
            print(f"drawing: make_data.py {' '.join(measured.draw)}", file=sys.stderr)
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if done.returncode != 0:
                lines = done.stderr.decode(errors="replace").strip().splitlines()
                raise SetError(f"make_data.py: {lines[-1] if lines else 'failed'}")
            draws[measured.draw] = out
        draw = draws[measured.draw]
    made = scratch / measured.folder
    made.mkdir()
    measured.keep(draw, made, sources)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True, help="as make_data.py's")
    parser.add_argument("--only", help="these folders only, comma-separated (data- optional)")
    parser.add_argument("--training", type=Path, default=HERE, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=HERE / "results", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = {m.folder: m for m in SETS}
    wanted = list(known)
    if args.only:
        wanted = [n if n.startswith("data-") else f"data-{n}" for n in args.only.split(",")]
        unknown = [n for n in wanted if n not in known]
        if unknown:
            print(f"measured_sets: unknown folder {unknown[0]} (known: {', '.join(known)})",
                  file=sys.stderr)  # fmt: skip
            return 2
    draws: dict = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for name in wanted:
                measured, folder = known[name], args.training / name
                try:
                    check(measured, folder, args.results)
                    print(f"{name}: there, and the rows its saved runs judged")
                    continue
                except SetError:
                    pass
                made = make(measured, args.sources, draws, Path(scratch))
                check(measured, made, args.results)  # before it replaces what is there
                if folder.exists():
                    shutil.rmtree(folder)
                shutil.move(made, folder)
                print(f"{name}: made, and the rows its saved runs judged ({measured.section})")
    except SetError as exc:
        print(f"measured_sets: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
