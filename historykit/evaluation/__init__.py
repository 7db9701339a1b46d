"""Measured compaction quality: what a pipeline keeps of the facts an agent needs, call by call.

From a transcript, `extract_probes` extracts four kinds of probe, deterministically (the rules and
their known misses are in its source, `historykit/evaluation/_extract.py`): **recall** (values a
tool or the user gave that the agent later used), **artifacts** (each file changed, with its latest
change), **continuation** (the current request, the open plan items) and **decisions** (each error
met and what the agent did next). `evaluate` replays the transcript call by call through a pipeline,
as `historykit analyze` does, and scores the view each call sent: a probe *holds* when its answer is
in the view (normalised), is *recoverable* when a recall handle the view names returns it, and is
*lost* otherwise; every call after the probe appeared is scored, against what the full history had
at that call. `ViewScorer` scores views made by anything else (the benchmarks' anchors). With
`judge=MODEL`, a model answers each probe's question with the compacted view and with the full
history (`judge_question`). The command is `historykit eval`.

Example:
    ```python
    import historykit
    from historykit.evaluation import evaluate
    from historykit.formats import read_transcript

    messages = read_transcript("session.jsonl").messages
    evaluation = evaluate(messages, historykit.default_pipeline(preset="chainreview"), window=32_000)
    evaluation                      # tables in Jupyter
    [k.reachable_share for k in evaluation.kinds]
    ```
"""

from historykit.evaluation._cost import CACHE_READ, CACHE_WRITE, call_cost
from historykit.evaluation._extract import extract_probes
from historykit.evaluation._judge import JUDGE_INSTRUCTIONS, JudgedProbe, JudgeKindScore, judge_question
from historykit.evaluation._matching import message_text, normalise
from historykit.evaluation._probes import KINDS, Probe, ProbeKind
from historykit.evaluation._report import Evaluation
from historykit.evaluation._run import evaluate
from historykit.evaluation._scoring import CallScore, KindScore, ViewScorer

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "JUDGE_INSTRUCTIONS",
    "KINDS",
    "CallScore",
    "Evaluation",
    "JudgeKindScore",
    "JudgedProbe",
    "KindScore",
    "Probe",
    "ProbeKind",
    "ViewScorer",
    "call_cost",
    "evaluate",
    "extract_probes",
    "judge_question",
    "message_text",
    "normalise",
]
