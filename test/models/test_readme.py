"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    exec(compile("\n".join(blocks), str(README), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    # what the comments next to the prints say, each checked by hand
    assert out[0] == "[11. 20.] 1"
    assert out[1] == "[[1.0, 1.0], [1.0, 1.0]] [[5.0, 5.0], [5.0, 5.0]]"
    assert out[2] == "True 2 True"
    assert out[3] == "[1. 1. 1. 1.] dtypes.int32 (2, 2) (4, 10)"
    assert out[4] == "[2.0, 4.0, 6.0]"
    assert out[5] == "['l1.bias', 'l1.weight', 'l2.bias', 'l2.weight'] True"
    assert abs(float(out[6]) - np.log(64)) < 0.5 and out[7] == "True"  # the untrained GPT's loss, printed twice
    assert out[8] == "(x*4+y)//4 0 100" and out[9] == "x" and out[-1] == "x*2"
