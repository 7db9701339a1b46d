"""`evaluate`: replay a transcript call by call through a pipeline and score every view it sends.

The replay is `historykit.analysis.replay`, the one `historykit analyze` runs (persistent mode,
under the transcript's window unless given, starting afresh at the agent's own compactions); the
pipeline is wrapped so that the view each call sent is kept and scored
(`historykit.evaluation.ViewScorer`). Each call's tokens and cache hits are the replay's,
anchored on the usage the transcript recorded where it did.

Example:
    ```python
    import historykit
    from historykit.evaluation import evaluate
    from historykit.formats import read_transcript

    transcript = read_transcript("session.jsonl")
    evaluation = evaluate(transcript.messages, historykit.default_pipeline(), window=32_000)
    print(evaluation.to_dict()["kinds"])
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from historykit._messages import Message
from historykit._pipeline import HistoryProcessor, Pipeline, PipelineResult
from historykit.analysis._analysis import replay
from historykit.errors import ArgumentTypeError, InvalidArgumentError
from historykit.evaluation._extract import extract_probes
from historykit.evaluation._judge import JudgedProbe, ask_both, asker, judge_question, pick
from historykit.evaluation._probes import Probe
from historykit.evaluation._report import Evaluation
from historykit.evaluation._scoring import ViewScorer


class _Recording(Pipeline):
    """The pipeline it wraps, keeping the view each run returns (what the call sends)."""

    def __init__(self, inner: Pipeline) -> None:
        super().__init__(inner.processors, counter=inner.counter)
        self.inner = inner
        self.views: list[list[Message]] = []
        self.written: dict[str, str] = {}
        """What the results handed on that a handle returns (`PipelineResult.originals`): the
        integrations keep it with the conversation for the recall tool."""

    def run(
        self, messages: Sequence[Any], context_window: int | None = None, **options: Any
    ) -> PipelineResult[Any]:
        result = self.inner.run(messages, context_window, **options)
        self.views.append(list(result.messages))
        self.written.update(result.originals)
        return result


def evaluate(
    messages: Sequence[Message],
    pipeline: HistoryProcessor | None = None,
    *,
    window: int | None = None,
    probes: Sequence[Probe] | None = None,
    recall: bool = False,
    name: str = "transcript",
    strategy: str | None = None,
    on_call: Callable[[int, int], None] | None = None,
    judge: Any = None,
    judge_probes: int | None = None,
    on_question: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Replay `messages` through `pipeline` (default: `historykit.default_pipeline()`) and score
    each call's view against `probes` (default: `extract_probes(messages)`).

    - `window`: the context window; `None` takes the transcript's (as `historykit analyze` does).
    - `recall`: install a `historykit.Recall` tool on the pipeline's steps first, so that
      their placeholders name handles and cleared outputs count as recoverable. It sets the
      steps' `recall_tool`: pass a pipeline of your own only if that is what you want.
    - `name`, `strategy`: what the report calls the transcript and the pipeline (default: the
      pipeline's steps).
    - `on_call(done, total)`: called after each replayed call (for progress bars).
    - `judge`: a model that answers each probe's question with the compacted view and with the full
      history, at the last call that scores the probe (`judge_question` asks it; a Pydantic AI
      model name, `Model` or `Agent`, or a callable `(prompt) -> str`); two requests per probe.
    - `judge_probes`: ask about at most this many probes (the kinds in turn); `None`: all of them.
    - `on_question(done, total)`: called after each probe the judge answered.
    """
    for index, msg in enumerate(messages):
        if not isinstance(msg, Message):
            raise ArgumentTypeError(f"message {index} is a {type(msg).__name__}, not a historykit Message")
    if judge_probes is not None and judge_probes < 0:
        raise InvalidArgumentError(f"judge_probes must be 0 or more, got {judge_probes}")
    ask = asker(judge) if judge is not None else None  # a bad judge fails before the replay
    if pipeline is None:
        from historykit.processors._default_pipeline import default_pipeline

        pipeline = default_pipeline()
    inner = pipeline if isinstance(pipeline, Pipeline) else Pipeline([pipeline])
    if recall:
        from historykit._recall import Recall

        Recall().install(inner.processors)
    recording = _Recording(inner)
    replayed = replay(messages, recording, window=window, on_call=on_call)
    found = list(extract_probes(messages) if probes is None else probes)
    scorer = ViewScorer(messages, found, counter=inner.counter)
    # A handed-on text's handle is its content's: a view can name it only once it was written.
    scorer.add_written(recording.written)
    points = [i for i, m in enumerate(messages) if m.role == "assistant"]
    scores = []
    starts = []
    for size, point, view in zip(replayed.calls, points, recording.views, strict=True):
        start = max((b for b in replayed.boundaries if b < point), default=0)
        starts.append(start)
        scores.append(
            scorer.score(size.call, point, view, start=start, tokens=size.after, reused=size.reused)
        )
    judged: tuple[JudgedProbe, ...] = ()
    if ask is not None:
        asked = pick(found, sorted(scorer.last_scored), judge_probes)

        async def ask_all() -> tuple[JudgedProbe, ...]:
            out = []
            for done, number in enumerate(asked, start=1):
                call, verdict = scorer.last_scored[number]
                point, start = scores[call - 1].point, starts[call - 1]
                question, expected = judge_question(found[number], messages)
                replies = await ask_both(ask, recording.views[call - 1], messages[start:point], question)
                out.append(JudgedProbe(number, call, question, expected, verdict, *replies))  # type: ignore[arg-type]
                if on_question is not None:
                    on_question(done, len(asked))
            return tuple(out)

        from historykit.checkpointers._inspection import _complete

        judged = _complete(ask_all())
    return Evaluation(
        name, strategy or replayed.pipeline, replayed.window, tuple(found), tuple(scores), judged
    )
