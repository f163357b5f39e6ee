"""The documentation: the site builds in strict mode (a broken link or anchor, a page missing
from the nav, or a docstring griffe cannot read fails), fetches nothing, and what the README and
the guides tell a user to type exists — the README's two commands as Makefile targets, every
`hpt ...` command line as the CLI parses it, every link as a file."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hpt.cli.main import _parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


def _hpt_command_lines(text: str) -> list[str]:
    """Every `hpt ...` command in the text's code blocks, continuation lines joined, comments
    and shell chaining (&&, ;, &) split off."""
    found: list[str] = []
    for block in _code_blocks(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            for part in re.split(r"&&|;|&\s*$|\|\|", line):
                # An environment setting may come first; lines of other kinds are not shell.
                if not re.match(r"\s*(?:[A-Z_]+=\S*\s+)*(?:\.venv/bin/)?hpt\s", part):
                    continue
                words = shlex.split(part, comments=True)
                while not words[0].endswith("hpt"):
                    words = words[1:]
                found.append(shlex.join(words[1:]))
    return found


def test_site_builds_strict_and_fetches_nothing(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    api = (site / "reference" / "api.html").read_text()
    # The API reference is rendered from the docstrings, not only named.
    for anchor in ("hpt.results.SampleRecord", "hpt.reports.api.report", "hpt.graphs.strategy",
                   "hpt.tasks.base.Task", "hpt.backends.Provider", "hpt.orchestrator.api.evaluate"):  # fmt: skip
        assert f'id="{anchor}"' in api, anchor
    for page in site.rglob("*.html"):
        html = page.read_text()
        # No web font, script or stylesheet from elsewhere: the pages work offline.
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page
        remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', html)
        assert not [u for u in remote if not u.startswith("https://github.com")], (page, remote)


def test_readme_commands_are_makefile_targets() -> None:
    readme = README.read_text()
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    said = set(re.findall(r"`make ([a-z][a-z-]*)", readme))
    assert {"run", "test", "install", "docs"} <= said
    assert said <= targets, said - targets
    # `make run` runs the main job on the embedded model (no --model: `local`, the default).
    run_recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert run_recipe and "hpt run" in run_recipe.group(1) and "--model" not in run_recipe.group(1)
    test_recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert test_recipe and "pytest" in test_recipe.group(1)
    docs_recipe = re.search(r"^docs:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert docs_recipe and "mkdocs build --strict" in docs_recipe.group(1)
    assert "make docs" in (ROOT / ".ci" / "run").read_text()


def test_readme_links_resolve() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links into docs/"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def _documents() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_parse(doc: Path) -> None:
    """Every concrete `hpt ...` line in a guide's code blocks parses with hpt's own CLI: the
    subcommand and every flag exist and take what the guide gives them. Synopses with
    [optional] parts or a|b alternatives are not commands to type."""
    parser = _parser()
    lines = [c for c in _hpt_command_lines(doc.read_text()) if not re.search(r"[\[|…]", c)]
    for line in lines:
        try:
            parser.parse_args(shlex.split(line))
        except SystemExit as exc:
            pytest.fail(f"{doc.name}: `hpt {line}` does not parse (exit {exc.code})")


def test_the_guides_show_commands() -> None:
    # The parse test above is only as good as what it finds.
    assert len(_hpt_command_lines(README.read_text())) >= 8
    for guide in (DOCS / "guides").glob("*.md"):
        assert _hpt_command_lines(guide.read_text()), guide.name
