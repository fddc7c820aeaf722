"""The documentation's examples run.

Every ```python fenced block of README.md and docs/*.md is executed. The blocks of one file
run in order in one namespace (a later block may use what an earlier one defined); each file
starts from a fresh namespace. Blocks that are not meant to run are fenced as ```text,
```console, ```bash or ```cpp instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)")


def code_blocks(path: Path) -> list[tuple[str, int, str]]:
    """(language, first line number, code) of every fenced block of a Markdown file."""
    blocks = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent, lang = m.group("fence"), len(m.group("indent")), m.group("info").lower()
        start = i + 1
        i = start
        body = []
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0] * len(fence)) and not close.strip(fence[0]):
                break
            # Strip the opening fence's indentation (blocks inside list items).
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            i += 1
        else:
            raise AssertionError(f"{path.name}:{start}: unterminated ``` block")
        blocks.append((lang, start + 1, "\n".join(body) + "\n"))
        i += 1
    return blocks


def python_blocks(path: Path) -> list[tuple[int, str]]:
    return [(line, code) for lang, line, code in code_blocks(path) if lang in ("python", "py")]


def test_docs_exist():
    names = {p.name for p in DOC_FILES}
    assert {"README.md", "getting-started.md", "api.md", "cpp.md"} <= names
    assert sum(len(python_blocks(p)) for p in DOC_FILES) > 0


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace: dict = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for line, code in python_blocks(path):
        # The file name and line make tracebacks point into the Markdown file.
        compiled = compile(code, f"{path.relative_to(ROOT)}:{line}", "exec")
        try:
            exec(compiled, namespace)
        except Exception as e:
            raise AssertionError(
                f"the ```python block at {path.relative_to(ROOT)}:{line} failed: "
                f"{type(e).__name__}: {e}"
            ) from e


_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(#[^)]*)?\)")


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_exist(path):
    text = path.read_text(encoding="utf-8")
    for m in _LINK.finditer(text):
        target = m.group("target")
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        assert (path.parent / target).exists(), f"{path.name}: broken link to {target}"
