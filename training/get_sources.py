"""Make the `--sources` folder that make_data.py reads: every file training/DATA.md lists,
taken from its repository at the commit DATA.md names and checked against the sha256
recorded there before it is written.

    python3 training/get_sources.py --out training/sources

Each repository is looked for under `--clones` as `owner+name` (a clone or a bare mirror);
one that is not there is cloned from GitHub first, without a checkout and with only the
blobs it reads downloaded (`git clone --filter=blob:none --no-checkout`; whole, for a
repository DATA.md takes a folder from). That is the one step of training that needs the
network: with the clones in place (copied from a machine that has it), nothing is
downloaded. A file already under `--out` with its recorded sha256
is left as it is, so a second run writes nothing; a file whose bytes at the named commit
differ from DATA.md's sha256 is an error and is not written.

Needs git and Python's standard library only (any python3; not a virtual environment).
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from make_data import HASH_ROW, SourceError, sha256_of  # noqa: E402  (how DATA.md is read)

GITHUB = "https://github.com"
# `owner/name` @ `commit` in DATA.md's table of sources
SOURCE_ROW = re.compile(r"`([\w.-]+)/([\w.-]+)`\s*@\s*`([0-9a-f]{40})`")


@dataclass(frozen=True)
class SourceFile:
    """One file (or, `path` ending in "/", one folder) DATA.md lists."""

    repo: str  # the folder under --sources and --clones: "owner+name"
    path: str  # inside the repository
    sha256: str  # as make_data.sha256_of computes it
    commit: str  # the repository's commit DATA.md names


def recorded(data_md: str) -> list[SourceFile]:
    """Every file of DATA.md's table of files, with its repository's commit from the table of
    sources. A repository named at two commits, or a file whose repository has none, is an
    error."""
    commits: dict[str, str] = {}
    for owner, name, commit in SOURCE_ROW.findall(data_md):
        repo = f"{owner}+{name}"
        if commits.setdefault(repo, commit) != commit:
            raise SourceError(f"training/DATA.md names {owner}/{name} at two commits")
    files = []
    for line in data_md.splitlines():
        found = HASH_ROW.match(line)
        if not found:
            continue
        repo, _, path = found.group(1).partition("/")
        sha256 = found.group(2)
        if repo not in commits:
            raise SourceError(f"training/DATA.md gives {repo}/{path} but no commit for {repo}")
        files.append(SourceFile(repo, path, sha256, commits[repo]))
    return files


def git_error(stderr: bytes) -> str:
    """The line of git's stderr that says what failed: its first `fatal:` or `error:` line
    (a failed clone follows it with hints), else its last line."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else "failed"


def git(clone: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(clone), *args], capture_output=True)
    if done.returncode != 0:
        raise SourceError(f"git {args[0]} in {clone}: {git_error(done.stderr)}")
    return done.stdout


def clone_of(repo: str, commit: str, clones: Path, *, download: bool, whole: bool) -> Path:
    """The git repository for `repo` under `clones`, holding `commit` (cloned, or the commit
    fetched, from GitHub when `download`). A new clone downloads only the blobs it reads,
    unless `whole`: a folder's thousands of files are better had in one pack than fetched one
    by one."""
    clone = clones / repo
    owner, name = repo.split("+", 1)
    if not clone.exists():
        if not download:
            raise SourceError(f"no clone of {owner}/{name} at {clone} (and --offline)")
        clones.mkdir(parents=True, exist_ok=True)
        url = f"{GITHUB}/{owner}/{name}.git"
        print(f"cloning {url}", file=sys.stderr)
        partial = [] if whole else ["--filter=blob:none"]
        try:
            git(clones, "clone", "--quiet", *partial, "--no-checkout", url, repo)
        except SourceError:
            shutil.rmtree(clone, ignore_errors=True)
            raise
    try:
        git(clone, "cat-file", "-e", f"{commit}^{{commit}}")
    except SourceError:
        if not download:
            raise SourceError(f"{clone} does not hold commit {commit}") from None
        git(clone, "fetch", "--quiet", "origin", commit)
    return clone


def extract(source: SourceFile, clone: Path, into: Path) -> None:
    """Writes `source` from `clone` at its commit to `into` (a file, or a folder's files)."""
    if source.path.endswith("/"):
        archive = git(clone, "archive", "--format=tar", source.commit, source.path.rstrip("/"))
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if not member.isfile():
                    continue
                inner = Path(member.name).relative_to(source.path.rstrip("/"))
                if len(inner.parts) != 1:
                    continue  # a folder's sha256 covers its own files, not those of subfolders
                (into / inner.name).write_bytes(tar.extractfile(member).read())
    else:
        into.write_bytes(git(clone, "show", f"{source.commit}:{source.path}"))


def get(source: SourceFile, out: Path, clones: Path, *, download: bool, whole: bool) -> bool:
    """Puts `source` under `out` unless it is there with its sha256 already; True when it
    wrote it. The file is checked in a scratch folder first, so a wrong one is never left."""
    target = out / source.repo / source.path
    if target.exists() and sha256_of(target) == source.sha256:
        return False
    clone = clone_of(source.repo, source.commit, clones, download=download, whole=whole)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        made = Path(scratch) / "made"
        if source.path.endswith("/"):
            made.mkdir()
        extract(source, clone, made)
        if sha256_of(made) != source.sha256:
            raise SourceError(
                f"{source.repo}/{source.path} at {source.commit[:12]}: "
                "sha256 differs from training/DATA.md"
            )
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        made.rename(target)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "sources", help="the --sources folder")
    parser.add_argument(
        "--clones", type=Path, default=HERE / ".cache" / "clones",
        help="where the repositories are, or are cloned to (one folder per owner+name)",
    )  # fmt: skip
    parser.add_argument(
        "--offline", action="store_true",
        help="use only the clones under --clones; never reach GitHub",
    )  # fmt: skip
    parser.add_argument("--data-md", type=Path, default=HERE / "DATA.md", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        files = recorded(args.data_md.read_text(encoding="utf-8"))
        if not files:
            raise SourceError(f"{args.data_md} lists no files")
        whole = {f.repo for f in files if f.path.endswith("/")}
        written = sum(
            get(f, args.out, args.clones, download=not args.offline, whole=f.repo in whole)
            for f in files
        )
    except SourceError as exc:
        print(f"get_sources: {exc}", file=sys.stderr)
        return 2
    repos = len({f.repo for f in files})
    print(f"{args.out}: {len(files)} files of {repos} repositories ({written} written)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
