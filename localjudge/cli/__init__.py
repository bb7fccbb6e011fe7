"""The `localjudge` command line: one module per command group. Commands parse options,
call the library and print what it returns."""

from __future__ import annotations

from localjudge.cli import bench, doctor, models, quality, score, serve  # noqa: F401 (commands)
from localjudge.cli.group import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli(prog_name="localjudge")
