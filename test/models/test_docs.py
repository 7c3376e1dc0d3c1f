"""The documentation tells the truth about the code it sits beside.

- the Python blocks of README.md and docs/*.md run as written (their own asserts check what their prose claims);
- docs/internals.md's package layout names every file of zeptograd/, and no file that is not there;
- docs/debugging.md documents every flag and environment variable the package reads, with its default;
- the README's test command is the one `.ci/run` runs;
- nothing in the repository narrates its own making (work sessions, issue numbers, private documents, the
  machine a figure came from as "this machine"), and code comments carry no before -> after timings.

A Python block runs when its fence is ```` ```python ````. A block that needs an optional package says so in its
fence, ```` ```python requires=llvmlite,pyopencl ````, and is skipped, by name, where one is missing.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest


def _root() -> Path:
    here = Path(__file__).resolve().parent
    while not (here / "pyproject.toml").exists():
        if here.parent == here:
            raise RuntimeError("no pyproject.toml above this test: cannot find the repository root")
        here = here.parent
    return here


ROOT = _root()
PACKAGE = ROOT / "zeptograd"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKDOWN = [ROOT / "README.md", *DOCS]
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def _blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line, info string, source) of each Python block of a markdown file."""
    text = path.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def _missing(info: str) -> list[str]:
    """The modules a block's fence requires that cannot be imported here."""
    if not info:
        return []
    match = re.fullmatch(r"requires=([\w.,]+)", info)
    if not match:
        raise ValueError(f"unknown fence info {info!r}: use ```python or ```python requires=module[,module]")
    return [m for m in match.group(1).split(",") if importlib.util.find_spec(m) is None]


def test_every_markdown_file_has_runnable_blocks():
    assert (ROOT / "README.md").exists() and DOCS, "README.md and docs/*.md must exist"
    for path in (ROOT / "README.md", ROOT / "docs" / "api.md", ROOT / "docs" / "internals.md"):
        assert _blocks(path), f"{path.name} has no Python block"


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path: Path):
    """Each file's blocks run in order in one namespace, as a reader would paste them one after the other."""
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    skipped = []
    for line, info, source in _blocks(path):
        missing = _missing(info)
        if missing:
            skipped.append(f"line {line} needs {', '.join(missing)}")
            continue
        exec(compile("\n" * (line) + source, str(path), "exec"), namespace)
    if skipped:
        pytest.skip(f"{path.name}: the other blocks ran; skipped: {'; '.join(skipped)}")


def test_fence_info_strings_are_known():
    """A misspelt fence (```py, ```python3) would leave a block unrun without anyone noticing."""
    for path in MARKDOWN:
        for m in re.finditer(r"^```(\S*)", path.read_text(), re.M):
            lang = m.group(1)
            assert not re.fullmatch(r"(?i)py|python\d|pycon|ipython", lang), f"{path.name}: fence ```{lang}"
        for _, info, _ in _blocks(path):
            _missing(info)  # raises on an unknown info string


# ---- the package layout


def _layout_paths() -> set[str]:
    text = (ROOT / "docs" / "internals.md").read_text()
    section = text.split("## Package layout", 1)[1]
    block = section.split("```", 2)[1]
    paths = set()
    for line in block.splitlines():
        m = re.match(r"^  (\S+\.py)\s", line)
        if m:
            paths.add(m.group(1))
    return paths


def test_layout_names_every_file_of_the_package():
    files = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")}
    listed = _layout_paths()
    assert listed, "docs/internals.md's package layout lists no file"
    assert not files - listed, f"files of zeptograd/ missing from docs/internals.md's layout: {sorted(files - listed)}"
    assert not listed - files, f"docs/internals.md lists files zeptograd/ does not have: {sorted(listed - files)}"


# ---- flags and environment variables

_ENV_READS = re.compile(
    r"""(?:ContextVar|getenv|os\.environ\.get|os\.environ\.setdefault|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']"""
    r"""|os\.environ\[\s*["']([A-Z][A-Z0-9_]*)["']\s*\]"""
)


def _env_names() -> set[str]:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for m in _ENV_READS.finditer(path.read_text()):
            names.add(m.group(1) or m.group(2))
    return names


def _flag_defaults() -> dict[str, str]:
    """The literal default of every ContextVar in the package (a computed one maps to '')."""
    defaults = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ContextVar" and node.args:
                name = node.args[0]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    default = node.args[1] if len(node.args) > 1 else ast.Constant(0)
                    defaults[name.value] = str(default.value) if isinstance(default, ast.Constant) else ""
    return defaults


def test_every_flag_and_environment_variable_is_documented():
    names = _env_names()
    assert {"DEBUG", "NOOPT", "BEAM", "DEVICE", "CC"} <= names, "the scan of the package found too little"
    doc = (ROOT / "docs" / "debugging.md").read_text()
    undocumented = sorted(n for n in names if f"`{n}`" not in doc)
    assert not undocumented, f"read by the package but not in docs/debugging.md: {undocumented}"


def test_flag_defaults_match_the_code():
    doc = (ROOT / "docs" / "debugging.md").read_text()
    rows = dict(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \| ([^|]*?) \|", doc, re.M))
    for name, default in _flag_defaults().items():
        assert name in rows, f"flag {name} has no row in docs/debugging.md's tables"
        if default:
            assert rows[name] == default, f"{name}: docs/debugging.md says default {rows[name]!r}, the code {default!r}"


# ---- the README's commands


def test_readme_test_command_is_the_one_ci_runs():
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.startswith("pip install")]
    assert len(ci) == 1, ".ci/run should run one install-and-test command"
    assert ci[0] in (ROOT / "README.md").read_text().splitlines(), "README's test command differs from .ci/run's"


def test_readme_main_job_command():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[examples]" && python -m zeptograd.examples.gpt' in readme
    assert 'pip install -e ".[examples]" && python -m zeptograd.examples.digits' in readme  # the quick example


# ---- no narration of how the repository was made

NARRATION = [
    r"\bthis stop\b",
    r"\bthe stop (?:before|after)\b",
    r"\b(?:next|earlier|previous) stop\b",
    r"\bthe issue(?:'s)?\b",
    r"\bissues? #?\d+",
    r"\bthe brief\b",
    r"\bthis session\b",
    r"\bthis machine\b",
    r"\bthe lent machine\b",
    r"\bseeds? \d{3}\b",
    r"\bshared/",
    r"\bDESIGN\.md\b",
]
# a before -> after figure: "12.6 -> 0.55 ms", "219 -> 301 TFLOP/s", "57 -> 39 us"
_FIGURE = r"\d[\d.,]*(?:-\d[\d.,]*)?"  # a number or a range of them
_UNIT = r"(?:ms|us|ns|s|[GT]FLOP/s|GB/s)"
TIMING = rf"{_FIGURE} ?{_UNIT}? ?-> ?{_FIGURE} ?{_UNIT}\b"
SCANNED = ["zeptograd", "test", "bench", "docs", "README.md", ".ci", "pyproject.toml"]


def _scanned_files():
    for name in SCANNED:
        base = ROOT / name
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for path in files:
            known = path.suffix in {".py", ".md", ".sh", ".cu", ".toml", ""}
            if known and path.name != "test_docs.py" and "__pycache__" not in path.parts:
                yield path


def test_nothing_narrates_its_own_making():
    pattern = re.compile("|".join(NARRATION), re.I)
    hits = []
    for path in _scanned_files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "narration of the project's history:\n" + "\n".join(hits)


def test_code_comments_carry_no_before_after_timings():
    """Figures belong in docs/performance.md, dated and with the machine named; a comment says why."""
    pattern = re.compile(TIMING)
    hits = []
    for path in _scanned_files():
        if path.suffix != ".py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "before -> after figures in code:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line, narrates",
    [
        ("# the code before this stop took 12 ms", True),
        ("see shared/DESIGN.md", True),
        ("lowered as seed 003 says", True),
        ("(issue 15, each tested against torch)", True),
        ("run on this machine's CPU", True),
        ("It stops before the final link", False),
        ("the tissue of the graph", False),
        ("the host's CPU", False),
    ],
)
def test_narration_pattern(line: str, narrates: bool):
    assert bool(re.search("|".join(NARRATION), line, re.I)) is narrates


@pytest.mark.parametrize(
    "line, is_timing",
    [
        ("(8,128,28,28) 3x3: 1018 -> 56 ms)", True),
        ("fp16 a + b 2021 -> 2678 GB/s", True),
        ("219 -> 301 TFLOP/s", True),
        ("its realize 167-223 -> 99-145 us", True),
        ("784 -> 816 columns", False),
        ("`index` -> int32 or int64", False),
        ("x*1 -> x", False),
    ],
)
def test_timing_pattern(line: str, is_timing: bool):
    assert bool(re.search(TIMING, line)) is is_timing
