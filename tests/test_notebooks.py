"""The notebooks in `notebooks/` run from top to bottom, offline, in a kernel of this interpreter.

Each notebook is executed with nbclient in a fresh kernel (its working directory a temporary one,
so the SQLite files it writes go there); a cell that raises fails the test. The notebooks are
committed without outputs, and each must show what it is about: HTML reports, plots.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
EXPECTED = [
    "01-pydantic-ai-quickstart",
    "02-langgraph-checkpointer",
    "03-analyze-a-real-transcript",
    "04-budgets-and-prompt-cache-cost",
    "05-evaluate-compaction-quality",
]
# What each notebook must display besides text: Jupyter renders a report as HTML, a plot as an image.
DISPLAYS = {
    "01-pydantic-ai-quickstart": {"text/html"},
    "02-langgraph-checkpointer": {"text/html"},
    "03-analyze-a-real-transcript": {"text/html", "image/png"},
    "04-budgets-and-prompt-cache-cost": {"text/html", "image/png"},
    "05-evaluate-compaction-quality": {"text/html", "image/png"},
}

if IN_CI:
    import nbclient  # CI installs the `notebooks` extra: its absence is a failure there
    import nbformat
else:
    nbclient = pytest.importorskip("nbclient", reason="the notebooks need the `notebooks` extra")
    nbformat = pytest.importorskip("nbformat", reason="the notebooks need the `notebooks` extra")
    pytest.importorskip("ipykernel", reason="the notebooks need the `notebooks` extra")
    pytest.importorskip("matplotlib", reason="the notebooks need the `notebooks` extra")


def test_the_notebooks_are_there() -> None:
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {index} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_teaches_no_deprecated_agent(path: Path) -> None:
    """LangGraph 1.x deprecates `create_react_agent` for `langchain.agents.create_agent`; a graph of
    your own takes `HistoryKitHook` as a node (as the README's recipes say)."""
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert "create_react_agent" not in cell.source, f"cell {index}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(path, as_version=4)
    # Checked at the end: the kernel must be this interpreter (its venv), not whatever `python` is first
    # on PATH (jupyter_client puts sys.executable in place of a kernel spec's bare `python`).
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    # A deprecated API the notebook's own code calls is an error: the notebooks teach what to write today.
    nb.cells.insert(
        0,
        nbformat.v4.new_code_cell(
            "import warnings\n"
            'warnings.filterwarnings("error", category=DeprecationWarning, module="__main__")'
        ),
    )
    client = nbclient.NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    # The kernel inherits this environment: the sample transcript, this checkout of historykit.
    monkeypatch.delenv("HISTORYKIT_TRANSCRIPT", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    client.execute()  # raises CellExecutionError when a cell raises

    outputs = [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = {kind for o in outputs for kind in o.get("data", {})}
    assert DISPLAYS[path.stem] <= shown, shown
    last = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
    assert Path(last).resolve() == Path(sys.executable).resolve()
