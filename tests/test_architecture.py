"""The layout holds: layers import downwards only, llama_cpp stays in engine/, and a new
scorer needs nothing outside its own module and one registry line."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localjudge.prompts import PromptParts
from localjudge.scorers import (
    LabelledRow,
    Scorer,
    ScorerRun,
    VerdictTask,
    make_scorer,
    register_scorer,
)
from localjudge.scorers.registry import SCORERS
from localjudge.testing import FakeJudge

PACKAGE = Path(__file__).resolve().parents[1] / "localjudge"

# every part of the package (a top-level module or folder) and the parts it may import
# (besides itself, errors and paths), from the engine up to the front ends
ALLOWED = {
    "errors": set(),
    "paths": set(),
    "engine": set(),
    "grammar": {"engine"},
    "scheduler": {"engine", "grammar"},
    "prompts": set(),
    "merge": set(),
    "model_registry": {"engine", "merge"},
    "judge": {"engine", "grammar", "scheduler", "prompts", "model_registry"},
    "scorers": {"judge", "prompts", "scheduler", "grammar", "model_registry"},
    "testing": {"engine", "judge", "scheduler", "scorers"},
    "evals": {"evals", "scorers", "judge"},
    "quality": {"evals", "scorers", "judge"},
    "loading": {"judge", "testing"},
    "demo": {"judge", "prompts"},
    "doctor": {"engine", "judge", "model_registry"},
    "bench": {"engine", "evals", "grammar", "judge", "prompts", "model_registry", "scheduler", "scorers"},
    "serve": {"evals", "grammar", "judge", "scheduler", "scorers"},
    "distributed": {"evals", "loading", "scorers"},
    "pytest_plugin": {"loading", "model_registry", "scorers"},
    "cli": {
        "bench", "demo", "distributed", "doctor", "engine", "evals", "judge", "loading",
        "quality", "model_registry", "scorers", "serve",
    },
    "__init__": {"evals", "judge", "scheduler", "scorers"},
    "__main__": {"cli"},
}  # fmt: skip


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def module_imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules `path` imports, at the top or inside a function ("from
    localjudge.x import y" counts as localjudge.x.y when y is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.add(inner if inner in known else node.module)
    return {name for name in found if name in known}


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_imports_only_the_parts_below_it():
    known = modules()
    for module, path in known.items():
        part = part_of(module)
        assert part in ALLOWED, f"{module}: place {part!r} in the layer table (ALLOWED)"
        for name in module_imports(path, known):
            target = part_of(name)
            if target != part:
                assert target in ALLOWED[part] | {"errors", "paths"}, f"{module} imports {name}"


def test_no_module_imports_itself_back_through_others():
    known = modules()
    graph = {m: module_imports(p, known) - {m} for m, p in known.items()}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = path[path.index(module) :] + [module]
            raise AssertionError("import circle: " + " -> ".join(cycle))
        if module in done:
            return
        for name in sorted(graph[module]):
            visit(name, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_every_package_folder_ships_in_the_wheel():
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    shipped = set(config["tool"]["setuptools"]["packages"])
    for init in PACKAGE.rglob("__init__.py"):
        name = ".".join(init.parent.relative_to(PACKAGE.parent).parts)
        assert name in shipped, f"{name} is missing from pyproject's packages"


def test_only_the_engine_imports_llama_cpp_and_only_distributed_imports_ray():
    for path in PACKAGE.rglob("*.py"):
        roots = {n.split(".")[0] for n in imports_of(path)}
        if (PACKAGE / "engine") not in path.parents:
            assert "llama_cpp" not in roots, path
        if path.name != "distributed.py":
            assert "ray" not in roots, path


CONCISE_SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["yes", "no"]},
        "reason": {"type": "string"},
    },
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}


def off_point_prompt(row: LabelledRow) -> PromptParts:
    return PromptParts(
        instructions="Decide whether the text wanders off the point.",
        shared="",
        own=f"Context: {row.input}\nClaim: {row.text}\nAnswer: ",
        version="conciseness/1",
    )


class ConcisenessScorer(Scorer):
    """A scorer written as a user would: one judge step, its own schema, no other edit."""

    id = "conciseness-scorer"
    verdict_task = VerdictTask(
        name="conciseness",
        schema=CONCISE_SCHEMA,
        prompt_version="conciseness/1",
        prompt=off_point_prompt,
        reason=lambda value, evidence: f"Judged {value['verdict']}.",
    )

    def __init__(self, model, *, max_words: int = 5, **options) -> None:
        super().__init__(model, **options)
        self.max_words = max_words

    async def run_async(self, run):
        run = ScorerRun.from_value(run)
        text = run.output_text
        parts = PromptParts(
            instructions="Decide whether the text wanders off the point.",
            shared="",
            own=f"Context: {text}\nClaim: {text}\nAnswer: ",
            version="conciseness/1",
        )
        usage = {}
        request = self.judge_request(parts, CONCISE_SCHEMA, self.verdict_max_tokens)
        (result,) = await self.ask("analyze", [request], usage)
        too_long = len(text.split()) > self.max_words
        score = self.scale if too_long or result.value["verdict"] == "yes" else 0
        return self.result(
            run,
            score=score,
            reason=f"{len(text.split())} words; the judge said {result.value['verdict']}.",
            preprocess_step_result=None,
            preprocess_prompt=None,
            analyze_step_result={"verdicts": [{"statement": text, **result.value}]},
            analyze_prompt=request.prompt,
            generate_reason_prompt=None,
            usage=usage,
            prompt_version="conciseness/1",
        )


@pytest.fixture
def registered():
    register_scorer("conciseness", ConcisenessScorer)
    yield
    SCORERS.pop("conciseness", None)


def test_a_new_scorer_is_one_class_and_one_registry_line(
    registered, tmp_home, tmp_path, monkeypatch
):
    from localjudge import run_evals
    from localjudge.cli import cli

    judge = FakeJudge()
    scorer = make_scorer("conciseness", judge, max_words=3, score_mode="ignored-here")
    result = run_evals(
        [{"id": 1, "output": "Short."}, {"id": 2, "output": "A much longer answer than needed."}],
        [scorer, make_scorer("toxicity", judge, reason="template")],
    )
    assert result.scores["conciseness-scorer"] == 0.5 and result.summary["failed_items"] == 0
    judge.close()

    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "x", "output": "One two three four five six seven."}) + "\n")
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    ran = runner.invoke(
        cli, ["eval", str(data), "--scorer", "conciseness", "--out", str(out), "--quiet"]
    )
    assert ran.exit_code == 0, ran.output
    assert json.loads(out.read_text())["scores"] == {"conciseness": 1}
    scored = runner.invoke(cli, ["score", "conciseness", "--output", "Tiny.", "--json"])
    assert scored.exit_code == 0 and json.loads(scored.output)["scorerId"] == "conciseness-scorer"
    unknown = runner.invoke(cli, ["score", "nope", "--output", "x"])
    assert unknown.exit_code == 2 and "unknown scorer 'nope'" in unknown.output


def test_a_scorer_that_declares_its_verdict_task_reaches_quality_and_calibrate(
    registered, tmp_home, tmp_path, monkeypatch
):
    """No edit outside the scorer: `quality --data` reads its rows, judges them with its
    prompt and schema, and `calibrate` stores a threshold under its prompt version."""
    from localjudge.cli import cli

    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    rows = [
        # the fake judge says "no" (on the point) when the text is part of the input
        {"input": f"Topic {i}: bridges.", "text": f"Topic {i}", "label": False, "group": "on"}
        for i in range(6)
    ] + [
        {"input": f"Topic {i}: bridges.", "text": f"Cats {i}", "label": True, "group": "off"}
        for i in range(6)
    ]
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [*rows, {"label": True}]) + "\n")
    runner = CliRunner()
    done = runner.invoke(cli, ["quality", "--data", str(data), "--task", "conciseness", "--json"])
    assert done.exit_code == 0, done.output
    (report,) = json.loads(done.output)["reports"]
    assert report["task"] == "conciseness" and report["rows"] == 12
    assert report["bad_rows"][0]["message"] == "needs a non-empty 'text'"
    assert set(report["agreement"]) == {"judge", "majority class"}  # it declares no word rule
    assert report["agreement"]["judge"]["confusion"] == {"tp": 6, "fp": 0, "tn": 6, "fn": 0}
    assert set(report["groups"]) == {"on", "off"}
    text = runner.invoke(cli, ["quality", "--data", str(data), "--task", "conciseness"])
    assert text.exit_code == 0 and "conciseness on" in text.output
    stored = runner.invoke(
        cli, ["calibrate", "--data", str(data), "--task", "conciseness", "--folds", "2", "--json"]
    )
    assert stored.exit_code == 0, stored.output
    assert json.loads(stored.output)["prompt_version"] == "conciseness/1"
    from localjudge.serve.scorer_api import scorer_entry

    assert scorer_entry("conciseness")["verdictTask"]["promptVersion"] == "conciseness/1"
    for unknown in ("nope", "rubric"):  # no such scorer; a scorer with no task of its own
        bad = runner.invoke(cli, ["quality", "--data", str(data), "--task", unknown])
        assert bad.exit_code == 1 and "Traceback" not in bad.output, bad.output


def test_register_scorer_refuses_what_is_not_a_scorer():
    with pytest.raises(ValueError, match="not a Scorer subclass"):
        register_scorer("bad", dict)
    with pytest.raises(ValueError, match="invalid scorer name"):
        register_scorer("has space", ConcisenessScorer)


def test_the_package_and_the_pure_layers_load_without_llama_cpp():
    """Only a real engine needs llama_cpp: importing localjudge (and so the pytest plugin
    every pytest session of a user loads), the scheduler and the fake engine must not."""
    import subprocess
    import sys

    code = (
        "import sys, localjudge, localjudge.pytest_plugin, localjudge.scheduler, "
        "localjudge.engine.fake, localjudge.testing; "
        "print('llama_cpp' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
