"""One expression grammar (sandbox/expr.py), evaluated two ways: numbers for the agent's specs,
numpy arrays for the worker's element expressions; the contract's check is the same grammar."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cudasrc.specs import evaluate as spec_evaluate
from sandbox import expr

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "i.real",
        "i ** 2",
        "[i]",
        "lambda: 1",
        "q + 1",
        "open('x')",
        "min(i)",
        "cdiv(i, 2, 3)",
        "max(i, key=1)",
        "'text'",
        "True + i",
        "9" * 40,
        "i +",
        "1+" * 300 + "1",
    ],
)
def test_the_check_and_both_evaluations_refuse_alike(text: str) -> None:
    """What the grammar refuses, the contract, the spec's numbers and the worker's arrays refuse
    with one message."""
    message = expr.expression_error(text, ["i"])
    assert message
    with pytest.raises(ValueError) as as_number:
        expr.number(text, {"i": 1})
    with pytest.raises(ValueError) as as_array:
        expr.values(text, 3)
    assert str(as_number.value) == str(as_array.value) == message


def test_the_spec_names_null_and_the_element_grammar_does_not() -> None:
    assert spec_evaluate("NULL", {}) == 0
    assert expr.expression_error("NULL", ["i"]).startswith("unknown name `NULL`")
    assert expr.expression_error("i < 3 and M_PI > 3", ["i"]) == ""


def _random_expression(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(["i", "i", str(rng.randint(-6, 20))])
    a, b = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    form = rng.randrange(10)
    if form == 0:
        return f"({a} {rng.choice(['+', '-', '*', '/', '//', '%'])} {b})"
    if form == 8:  # rounding of negative quotients: C truncates `/`, `//` and `%` floor
        return f"({a} {rng.choice(['/', '//', '%'])} {rng.choice([-3, -2, 2, 3, 7])})"
    if form == 1:
        return f"({a} {rng.choice(['<<', '>>'])} {rng.randint(0, 4)})"
    if form == 2:
        return f"({a} {rng.choice(['<', '<=', '==', '!=', '>', '>='])} {b})"
    if form == 3:
        return f"(0 <= {a} < {b})"
    if form == 4:
        return f"({a} {rng.choice(['and', 'or'])} not {b})"
    if form == 5:
        return f"({a} if {b} else -{a})"
    if form == 6:
        return f"{rng.choice(['min', 'max', 'cdiv'])}({a}, {b})"
    if form == 7:
        return f"{rng.choice(['abs', 'pow2'])}({a})"
    return f"min({a}, {b}, {_random_expression(rng, depth - 1)})"


def test_numbers_and_arrays_agree_on_random_expressions() -> None:
    """Wherever the spec's evaluation gives a number at every index, the worker's gives the same
    numbers; where an index divides by zero, the worker refuses the whole expression."""
    rng = random.Random(29)
    count, agreed, refused = 12, 0, 0
    for _ in range(400):
        text = _random_expression(rng, 4)
        assert expr.expression_error(text, ["i"]) == ""
        scalars: list[int | float] = []
        failure = ""
        for i in range(count):
            try:
                scalars.append(expr.number(text, {"i": i}))
            except ValueError as exc:
                failure = str(exc)
                break
        if not failure:
            assert expr.values(text, count).tolist() == scalars, text
            agreed += 1
        elif "divides by zero" in failure:
            with pytest.raises(ValueError, match="divide by zero"):
                expr.values(text, count)
            refused += 1
    assert agreed > 200 and refused > 10  # both branches ran, on many expressions


def test_checking_and_numbers_never_load_numpy() -> None:
    """The contract and the spec's numbers import the grammar; only arrays need numpy."""
    code = (
        "import json, sys\n"
        "from sandbox import contract, expr\n"
        "expr.number('cdiv(n, 256) * 2', {'n': 1000})\n"
        "contract.expression_error('i < 3', ['i'])\n"
        "before = 'numpy' in sys.modules\n"
        "expr.values('i * 2', 4)\n"
        "print(json.dumps([before, 'numpy' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, True]
