"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    exec(compile("\n".join(blocks), str(README), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "(x*4+y)//4 0 100" and out[1] == "x" and out[-1] == "x*2"
