"""The packaging check (`make wheel-check`, part of `make test`): what a user installs works.

Builds the sdist and, from it, the wheel (`uv build`); checks both carry `historykit/py.typed`; then
installs the wheel into two new virtual environments, outside the repository:

- `all`: the wheel with `[all]`: every public module (no `_` in its dotted path) must import and
  every name in its `__all__` must resolve.
- `runtime`: the wheel and its required dependencies only. The same, except where the import fails
  on a module whose distribution (as `[all]` installs it) an optional extra of the package declares
  and no required dependency does: those are listed as skipped, with the extra. Any other missing
  module fails the check: one a required dependency should bring, and one the package imports but
  only gets through another package's dependencies (declare what you import).

In both, `historykit --help` must run. uv's cache makes the installs fast after the first run; the
package registry is the only network this needs (for the build backend and the dependencies).

Usage: `python .ci/check_wheel.py` from the repository root (the interpreter is the one the new
environments use; `uv` is taken from beside it, or from PATH). `--inside` is the part that runs in
a new environment.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

PACKAGE = "historykit"
TYPED_MARKER = f"{PACKAGE}/py.typed"
ROOT = Path(__file__).resolve().parent.parent

_UMBRELLA_EXTRAS = {"all", "dev", "test", "docs"}
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--inside", choices=["runtime", "all"], help="import every public name (in a new venv)"
    )
    parser.add_argument(
        "--with-extras", type=Path, help="(--inside runtime) the modules [all] installs, as JSON"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and print it")
    args = parser.parse_args()
    if args.inside:
        with_extras = json.loads(args.with_extras.read_text()) if args.with_extras else {}
        return import_public_names(strict=args.inside == "all", with_extras=with_extras)
    return check(keep=args.keep)


def check(*, keep: bool) -> int:
    uv = _uv()
    work = Path(tempfile.mkdtemp(prefix="historykit-wheel-check-"))
    try:
        started = time.perf_counter()
        dist = work / "dist"
        _run([uv, "build", "--quiet", "--out-dir", str(dist), str(ROOT)])
        (wheel,) = dist.glob("*.whl")
        (sdist,) = dist.glob("*.tar.gz")
        _check_typed_marker(wheel, sdist)
        print(f"built {wheel.name} and {sdist.name}, both with {TYPED_MARKER}")
        failed = False
        with_extras = work / "with-extras.json"
        for name, requirement in (("all", f"{PACKAGE}[all] @ {wheel.as_uri()}"), ("runtime", str(wheel))):
            venv = work / f"venv-{name}"
            _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
            python = venv / "bin" / "python"
            _run([uv, "pip", "install", "--quiet", "--python", str(python), requirement])
            if name == "all":
                _run([str(python), "-c", _DUMP_MODULES, str(with_extras)])
            # From a directory without the source tree, so the imports can only find the wheel.
            inside = subprocess.run(
                [
                    str(python),
                    str(Path(__file__).resolve()),
                    "--inside",
                    name,
                    "--with-extras",
                    str(with_extras),
                ],
                cwd=work,
            )
            cli = subprocess.run(
                [str(venv / "bin" / PACKAGE), "--help"], cwd=work, capture_output=True, text=True
            )
            if cli.returncode != 0 or "Usage:" not in cli.stdout:
                print(f"[{name}] `{PACKAGE} --help` failed ({cli.returncode}):\n{cli.stdout}{cli.stderr}")
            else:
                print(f"[{name}] `{PACKAGE} --help` runs")
            failed = failed or inside.returncode != 0 or cli.returncode != 0
        print(f"wheel check {'FAILED' if failed else 'passed'} in {time.perf_counter() - started:.0f} s")
        return 1 if failed else 0
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


_DUMP_MODULES = (
    "import importlib.metadata, json, sys; "
    "json.dump(importlib.metadata.packages_distributions(), open(sys.argv[1], 'w'))"
)
"""Writes the top-level modules an environment has, each with the distributions that install it
(run in the `all` one)."""


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        sys.exit("uv not found (beside the interpreter or on PATH); `make` installs it into .venv")
    return found


def _run(command: list[str]) -> None:
    subprocess.run(command, check=True, cwd=ROOT)


def _check_typed_marker(wheel: Path, sdist: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        if TYPED_MARKER not in archive.namelist():
            sys.exit(f"{wheel.name} has no {TYPED_MARKER}: type checkers would ignore the package's hints")
    with tarfile.open(sdist) as archive:
        if not any(name.endswith(f"/{TYPED_MARKER}") for name in archive.getnames()):
            sys.exit(f"{sdist.name} has no {TYPED_MARKER}")


def import_public_names(*, strict: bool, with_extras: dict[str, list[str]]) -> int:
    """Import every public module of the installed package and resolve each name of its `__all__`."""
    label = "all" if strict else "runtime"
    package = importlib.import_module(PACKAGE)
    package_dir = Path(package.__file__).parent  # type: ignore[arg-type]
    if ROOT in package_dir.parents:
        print(f"[{label}] {PACKAGE} was imported from the source tree, not from the wheel")
        return 1
    required, optional = _dependencies()
    errors: list[str] = []
    skipped: dict[str, list[str]] = {}  # extra -> the public names that need it

    def attempt(what: str, load: Callable[[], object]) -> object | None:
        try:
            with warnings.catch_warnings():
                # The frameworks' own deprecations (LangGraph's, ...) are not what is checked here.
                warnings.simplefilter("ignore", DeprecationWarning)
                return load()
        except ImportError as error:
            missing = (error.name or "").split(".")[0]
            brought_by = _brought_by_extras(missing, required, optional, with_extras)
            if strict or brought_by is None:
                errors.append(f"{what}: {type(error).__name__}: {error}")
            else:
                skipped.setdefault(brought_by, []).append(what)
        except Exception as error:  # a public name must import: report whatever stops it
            errors.append(f"{what}: {type(error).__name__}: {error}")
        return None

    modules = names = 0
    for module_name in _public_modules(package_dir):
        module = attempt(module_name, functools.partial(importlib.import_module, module_name))
        if module is None:
            continue
        modules += 1
        for name in getattr(module, "__all__", []):
            if attempt(f"{module_name}.{name}", functools.partial(_resolve, module, name)) is not None:
                names += 1
    print(f"[{label}] {modules} public modules and {names} names imported")
    # One line an extra, said as what it is: without the extra installed these cannot import, as
    # intended (a line a name, "skipped ...", read like failures in make test's output).
    for line in extra_lines(skipped):
        print(f"[{label}] {line}")
    for line in errors:
        print(f"[{label}] FAILED {line}")
    return 1 if errors else 0


def _resolve(module: object, name: str) -> object:
    getattr(module, name)
    return True  # not the value: a public constant may be None


def _public_modules(package_dir: Path) -> list[str]:
    modules = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts[-1] == "__main__" or any(part.startswith("_") for part in parts):
            continue
        modules.append(".".join(parts))
    return modules


def _dependencies() -> tuple[set[str], dict[str, set[str]]]:
    """The package's required distributions, and each optional one with the extras that bring it."""
    required: set[str] = set()
    optional: dict[str, set[str]] = {}
    for requirement in importlib.metadata.requires(PACKAGE) or []:
        name_match = _REQUIREMENT_NAME.match(requirement)
        if name_match is None:
            continue
        name = _normalize(name_match.group(1))
        extra = _EXTRA_MARKER.search(requirement)
        if extra is None:
            required.add(name)
        else:
            optional.setdefault(name, set()).add(extra.group(1))
    return required, optional


def extra_lines(needing: dict[str, list[str]]) -> list[str]:
    """What needs an optional extra, one line an extra: `ok without historykit[langgraph]: 3 names
    need it (historykit.plugins.langchain, ...)`.

    Example:
        >>> extra_lines({"historykit[otel]": ["a.b", "a.c"]})
        ['ok without historykit[otel]: 2 names need it (a.b, a.c)']
    """
    return [
        f"ok without {extra}: {len(names)} {'name needs' if len(names) == 1 else 'names need'} it "
        f"({', '.join(names)})"
        for extra, names in sorted(needing.items())
    ]


def _brought_by_extras(
    module: str, required: set[str], optional: dict[str, set[str]], with_extras: dict[str, list[str]]
) -> str | None:
    """The extras that declare the distribution of `module`, when only extras do; `None` when a
    missing module is an error (a required dependency provides it, or no extra declares it)."""
    distributions = {_normalize(name) for name in with_extras.get(module, [])}
    if not distributions or distributions & required:
        return None
    extras = {extra for name in distributions for extra in optional.get(name, ())}
    # `all` (and the development extras) repeat the others: name the extra a user would pick.
    chosen = (extras - _UMBRELLA_EXTRAS) or extras
    return f"{PACKAGE}[{','.join(sorted(chosen))}]" if chosen else None


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


if __name__ == "__main__":
    sys.exit(main())
