"""The quality report page in a real headless browser (Debian's Chromium): it renders, with
its pictures, from the one file (`make test-report`; `make browser-deps` installs Chromium)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from localjudge.cli import cli
from localjudge.quality.pictures import JUDGE_COLOUR

pytestmark = pytest.mark.browser


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing under CI: `make browser-deps` installs it")
        pytest.skip("chromium not installed (make browser-deps)")
    return found


def screenshot(browser: str, page, shot) -> None:
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1100,1400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def judge_pixels(path) -> int:
    """Pixels of the judge's line colour in a screenshot."""
    from PIL import Image

    target = tuple(int(JUDGE_COLOUR[i : i + 2], 16) for i in (1, 3, 5))
    image = Image.open(path).convert("RGB")
    return sum(
        count
        for count, colour in image.getcolors(maxcolors=1 << 24)
        if all(abs(c - t) <= 8 for c, t in zip(colour, target, strict=True))
    )


def test_the_report_page_renders_with_its_pictures(tmp_path, tmp_home, monkeypatch):
    pytest.importorskip("matplotlib")
    browser = chromium()
    monkeypatch.setenv("LOCALJUDGE_ENGINE", "fake")
    page = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["quality", "--html", str(page)])
    assert result.exit_code == 0, result.output
    shot = tmp_path / "shot.png"
    screenshot(browser, page, shot)
    rendered = judge_pixels(shot)
    # the same page with its picture taken out: the judge's blue comes from the picture
    bare = tmp_path / "bare.html"
    text = page.read_text()
    start = text.index("src='data:image/png;base64,")
    bare.write_text(text[:start] + "src=''" + text[text.index("'>", start) + 1 :])
    bare_shot = tmp_path / "bare.png"
    screenshot(browser, bare, bare_shot)
    assert judge_pixels(bare_shot) < 50
    assert rendered > 2000, f"only {rendered} pixels of the judge's colour: no picture drawn"
