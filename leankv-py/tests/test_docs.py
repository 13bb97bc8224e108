"""The README's example and the package docstring's run as written."""

import doctest
import pathlib
import re

import pytest

import leankv

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example(tmp_path, capsys):
    if not README.exists():
        pytest.skip("README.md is not next to the tests")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    code = blocks[0].replace('"/tmp/example-db"', repr(str(tmp_path / "db")))
    exec(compile(code, str(README), "exec"), {})
    assert "lovelace" in capsys.readouterr().out


def test_package_docstring():
    failures, tests = doctest.testmod(leankv)
    assert tests > 0 and failures == 0
