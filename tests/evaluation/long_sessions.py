"""Generated long agent sessions (seeded): thousands of calls, many file edits, errors and plans.

`long_session(seed, calls=2_000)` writes, deterministically, a session as a coding agent records
it: a first request; a `TodoWrite` plan, rewritten as items get done; then model calls, each an
assistant message (a short sentence and one tool call) answered by its tool result. The calls
follow the loop agents run: search (`grep -rn`), read a file (numbered lines, as Claude Code's
`Read` returns them), edit it (`Edit` with an `old_string` taken from the file as it is then and a
`new_string` that adds lines naming new identifiers), write a new file now and then, run the tests
(`pytest`): a run fails with a traceback whose last line names a value (`KeyError: 'user_id_417'`,
`AssertionError: expected 1234, got 1235`) and the next call acts on it (edits the file the
traceback names, quoting the value); a later run passes. The user sends a new short request every
few hundred calls. The sentences name values earlier outputs gave (a function a search found, the
number a failure printed), so the probes of every kind (`historykit.evaluation.extract_probes`)
have something to find.

Files keep their content across the session (an edit changes what a later read returns), so what
an agent would have to remember is consistent. Sizes: about 530 tokens per call on average (a read
is 20 to 120 lines), about 1.06M tokens for 2,000 calls (seed 7).

Used by `benchmarks/bench_quality.py` (`--generated`) and `tests/evaluation/test_long_sessions.py`.

Example:
    ```python
    from historykit.evaluation import extract_probes

    session = long_session(7, calls=1_000)
    probes = extract_probes(session)
    ```
"""

from __future__ import annotations

import random

from historykit._messages import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = ["long_session"]

_AREAS = ("billing", "users", "orders", "search", "auth", "export", "reports", "cache")
_NOUNS = ("total", "record", "token", "invoice", "batch", "cursor", "limit", "digest", "report")
_VERBS = ("compute", "load", "merge", "parse", "render", "check", "flush", "resolve", "index")
_ERRORS = (
    "KeyError: '{ident}_{n}'",
    "AssertionError: expected {n}, got {m}",
    "ValueError: invalid literal for {ident}: '{n}'",
    "TypeError: {func}() missing 1 required positional argument: '{ident}'",
    "AttributeError: 'NoneType' object has no attribute '{ident}'",
)
_REQUESTS = (
    "Now make `{func}` in {path} handle an empty list.",
    "The export of {area} is slow: find out why and fix it.",
    "Add a test for `{func}` and make it pass.",
    "Rename `{func}` to `{func}_v2` everywhere, keep an alias.",
    "Check that the {area} module still passes its tests after the last change.",
)
_PLAN = (
    "Reproduce the failure in {area}",
    "Fix {func} in {path}",
    "Add a regression test for {func}",
    "Run the whole test suite",
    "Update the changelog for {area}",
    "Review the {area} module for the same bug",
)


class _Writer:
    """Builds one session; every random choice goes through `self.rng`."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.messages: list[Message] = []
        self.files: dict[str, list[str]] = {}
        self.functions: dict[str, list[str]] = {}
        self.ids = 0
        for area in _AREAS:
            for k in range(self.rng.randint(3, 6)):
                self._new_file(f"src/{area}/{self.rng.choice(_NOUNS)}_{k}.py", area)

    def _ident(self) -> str:
        return f"{self.rng.choice(_NOUNS)}_{self.rng.choice(_NOUNS)}"

    def _func(self, area: str) -> str:
        return f"{self.rng.choice(_VERBS)}_{area}_{self.rng.choice(_NOUNS)}_{self.rng.randint(1, 999)}"

    def _new_file(self, path: str, area: str) -> list[str]:
        lines: list[str] = [f'"""The {area} {path.rsplit("/", 1)[-1][:-3]} helpers."""', ""]
        names = []
        for _ in range(self.rng.randint(4, 12)):
            func = self._func(area)
            names.append(func)
            lines.append(f"def {func}({self._ident()}, limit={self.rng.randint(10, 5000)}):")
            for _ in range(self.rng.randint(3, 10)):
                value = self.rng.randint(0, 9999)
                lines.append(f"    {self._ident()} = {self._ident()}.get('{self._ident()}', {value})")
            lines.append(f"    return {self._ident()}")
            lines.append("")
        self.files[path] = lines
        self.functions[path] = names
        return lines

    def _call(
        self, text: str, name: str, arguments: dict[str, object], result: str, error: bool = False
    ) -> None:
        self.ids += 1
        cid = f"toolu_{self.ids:05d}"
        parts = (
            (TextPart(text), ToolCallPart(cid, name, arguments))
            if text
            else (ToolCallPart(cid, name, arguments),)
        )
        self.messages.append(Message("assistant", parts))
        self.messages.append(Message("tool", (ToolResultPart(cid, name, result, is_error=error),)))

    # --- the steps ------------------------------------------------------------------------------

    def plan(self, items: list[str], done: int) -> None:
        todos = [
            {
                "content": item,
                "status": "completed" if k < done else ("in_progress" if k == done else "pending"),
            }
            for k, item in enumerate(items)
        ]
        self._call("", "TodoWrite", {"todos": todos}, "Todos have been modified successfully.")

    def grep(self, path: str) -> str:
        func = self.rng.choice(self.functions[path])
        hits = [
            f"{p}:{k + 1}:{ln}" for p, lines in self.files.items() for k, ln in enumerate(lines) if func in ln
        ]
        self._call(
            f"Let me find where `{func}` is defined.",
            "Bash",
            {"command": f"grep -rn '{func}' src/"},
            "\n".join(hits),
        )
        return func

    def read(self, path: str, func: str | None) -> None:
        text = "\n".join(f"{k + 1:>6}→{line}" for k, line in enumerate(self.files[path]))
        said = f"`{func}` is in {path}; reading it." if func else ""
        self._call(said, "Read", {"file_path": path}, text)

    def edit(self, path: str, because: str) -> None:
        lines = self.files[path]
        at = self.rng.randrange(2, max(3, len(lines) - 3))
        old = lines[at : at + self.rng.randint(1, 3)]
        func = self._func(path.split("/")[1])
        added = [
            f"    {self._ident()}_{self.rng.randint(1, 999)} = {func}({self._ident()}, strict=True)"
            for _ in range(self.rng.randint(1, 4))
        ]
        new = [*old, *added]
        lines[at : at + len(old)] = new
        self.functions[path].append(func)
        self._call(
            because,
            "Edit",
            {"file_path": path, "old_string": "\n".join(old), "new_string": "\n".join(new)},
            f"The file {path} has been updated.",
        )

    def write(self, area: str) -> None:
        path = f"src/{area}/{self.rng.choice(_NOUNS)}_{len(self.files)}.py"
        content = self._new_file(path, area)
        self._call(
            f"I'll add {path} for the new helpers.",
            "Write",
            {"file_path": path, "content": "\n".join(content)},
            f"File created successfully at: {path}",
        )

    def test(self, path: str, fail: bool) -> str | None:
        test = f"tests/test_{path.split('/')[1]}.py"
        if not fail:
            count = self.rng.randint(20, 400)
            self._call(
                "",
                "Bash",
                {"command": f"pytest -q {test}"},
                f"{'.' * min(count, 80)}\n{count} passed in 1.2s",
            )
            return None
        func = self.rng.choice(self.functions[path])
        n = self.rng.randint(100, 99_999)
        error = self.rng.choice(_ERRORS).format(ident=self._ident(), n=n, m=n + 1, func=func)
        trace = [
            "Traceback (most recent call last):",
            f'  File "{test}", line {self.rng.randint(10, 400)}, in test_{func}',
            f"    assert {func}({self._ident()}) == {n}",
            f'  File "{path}", line {self.rng.randint(3, 200)}, in {func}',
            f"    return {self._ident()}[{self._ident()}]",
            error,
        ]
        output = "\n".join(
            ["F" + "." * self.rng.randint(5, 60), *trace, f"FAILED {test}::test_{func} - {error}", "1 failed"]
        )
        self._call("", "Bash", {"command": f"pytest -q {test}"}, f"Exit code 1\n{output}", error=True)
        return error

    def request(self, text: str) -> None:
        self.messages.append(Message.user(text))


def long_session(seed: int, calls: int = 2_000) -> list[Message]:
    """A session of about `calls` model calls (module docstring): the same seed, the same session."""
    w = _Writer(seed)
    rng = w.rng
    area = rng.choice(_AREAS)
    path = rng.choice([p for p in w.files if p.startswith(f"src/{area}/")])
    func = rng.choice(w.functions[path])
    w.request(f"The {area} tests fail since yesterday: `{func}` in {path} returns the wrong total. Fix it.")
    items = [item.format(area=area, func=func, path=path) for item in rng.sample(_PLAN, 5)]
    done = 0
    w.plan(items, done)
    error: str | None = None
    while len(w.messages) < 2 * calls:
        if rng.random() < 0.004:  # a new request from the user now and then
            area = rng.choice(_AREAS)
            path = rng.choice([p for p in w.files if p.startswith(f"src/{area}/")])
            func = rng.choice(w.functions[path])
            w.request(rng.choice(_REQUESTS).format(func=func, path=path, area=area))
            items = [item.format(area=area, func=func, path=path) for item in rng.sample(_PLAN, 5)]
            done = 0
            w.plan(items, done)
            continue
        if error is not None:  # act on the failure just met
            w.edit(path, f"The test fails with `{error}`; the fix goes in {path}.")
            error = None
            continue
        roll = rng.random()
        if roll < 0.15:
            found = w.grep(path)
            w.read(path, found)
        elif roll < 0.3:
            path = rng.choice(list(w.files))
            w.read(path, None)
        elif roll < 0.6:
            w.edit(path, f"I'll change {path} next to `{rng.choice(w.functions[path])}`.")
        elif roll < 0.65:
            w.write(path.split("/")[1])
        elif roll < 0.95:
            error = w.test(path, fail=rng.random() < 0.4)
        elif done < len(items):
            done += 1
            w.plan(items, done)
    return w.messages
