"""Pipeline specs: `default`, or processor names with `:option=value` settings, built into a `Pipeline`."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any

from historykit._pipeline import HistoryProcessor, Pipeline
from historykit.cli._app import EXIT_FAILURE, CliError
from historykit.cli._render import _one_line
from historykit.processors._trigger import Trigger

PROCESSOR_NAMES: dict[str, tuple[str, str]] = {
    "dedupe": ("historykit.processors", "DedupeFileReads"),
    "clear": ("historykit.processors", "ClearToolResults"),
    "offload": ("historykit.processors", "OffloadToolOutputs"),
    "strip": ("historykit.processors", "StripThinking"),
    "truncate": ("historykit.processors", "PairwiseTruncate"),
    "summarize": ("historykit.processors", "Summarize"),
    "repair": ("historykit.processors", "Repair"),
}
"""Pipeline-spec name -> (public module, class) of each processor."""

_NAME_ALIASES = {
    "dedupefilereads": "dedupe",
    "dedupe_file_reads": "dedupe",
    "cleartoolresults": "clear",
    "clear_tool_results": "clear",
    "offloadtooloutputs": "offload",
    "offload_tool_outputs": "offload",
    "stripthinking": "strip",
    "strip_thinking": "strip",
    "pairwisetruncate": "truncate",
    "pairwise_truncate": "truncate",
    "summary": "summarize",
    "summarise": "summarize",
}


def build_pipeline(spec: str) -> Pipeline:
    """The pipeline a spec names (see the module docstring); `CliError` (exit 2) says what is wrong."""
    text = spec.strip()
    if not text:
        raise CliError("empty pipeline spec: give `default` or names such as dedupe,clear,strip,truncate")
    if text.lower() == "default":
        return _default_pipeline()
    steps: list[HistoryProcessor] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise CliError(f"pipeline spec {spec!r}: an empty step (two commas in a row?)")
        steps.append(_build_step(item, spec))
    if not steps or type(steps[-1]).__name__ != "Repair":
        steps.append(_processor_class("repair")())
    return Pipeline(steps)


def _default_pipeline() -> Pipeline:
    import historykit

    factory = getattr(historykit, "default_pipeline", None)
    if factory is None:
        raise CliError(
            "the default pipeline (historykit.default_pipeline) is not available in this installation; "
            "name the processors instead, e.g. --pipeline dedupe,clear,strip,truncate",
            EXIT_FAILURE,
        )
    pipeline = factory()
    return pipeline if isinstance(pipeline, Pipeline) else Pipeline([pipeline])


def _processor_class(name: str) -> Any:
    module_name, class_name = PROCESSOR_NAMES[name]
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        raise CliError(
            f"the processor {name!r} ({class_name}) is not available in this installation",
            EXIT_FAILURE,
        ) from None


_SETTING_START = re.compile(r":(?=\s*[A-Za-z_][\w-]*\s*=)")
"""A `:` that starts a setting (`:option=`); any other colon belongs to a value (`openai:gpt-4o`)."""


def _build_step(item: str, spec: str) -> HistoryProcessor:
    raw_name, _, rest = item.partition(":")
    if rest and not _SETTING_START.match(":" + rest):
        raise CliError(f"pipeline spec {spec!r}: {raw_name.strip()} setting {rest!r} is not option=value")
    settings = _SETTING_START.split(":" + rest)[1:] if rest else []
    key = raw_name.strip().lower().replace("-", "_")
    name = _NAME_ALIASES.get(key, key)
    if name == "default":
        raise CliError(
            f"pipeline spec {spec!r}: `default` stands alone, it cannot be combined with other steps"
        )
    if name not in PROCESSOR_NAMES:
        raise CliError(
            f"pipeline spec {spec!r}: unknown processor {raw_name.strip()!r}; valid names: "
            f"default, {', '.join(PROCESSOR_NAMES)}"
        )
    cls = _processor_class(name)
    default_trigger = _default_trigger(cls)
    options = _settable_options(cls)
    if default_trigger is not None:
        options = [*options, *(o for o in _TRIGGER_OPTIONS if o not in options)]
    kwargs: dict[str, Any] = {}
    for setting in settings:
        option, sep, value = setting.partition("=")
        option = option.strip().replace("-", "_")
        if not sep or not option:
            raise CliError(f"pipeline spec {spec!r}: {name} setting {setting!r} is not option=value")
        if option not in options:
            valid = ", ".join(options) or "(none)"
            raise CliError(f"pipeline spec {spec!r}: {name} has no option {option!r}; its options: {valid}")
        kwargs[option] = _parse_value(value.strip())
    try:
        if default_trigger is not None:
            # The trigger settings (`max_fraction=0.7`) go into the processor's `Trigger`.
            trigger = {o: kwargs.pop(o) for o in _TRIGGER_OPTIONS if o in kwargs}
            if trigger:
                kwargs["trigger"] = default_trigger.with_settings(**trigger)
        processor = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise CliError(f"pipeline spec {spec!r}: {item}: {_one_line(str(exc))}") from None
    if not isinstance(processor, HistoryProcessor):
        raise CliError(f"pipeline spec {spec!r}: {name} did not build a historykit processor", EXIT_FAILURE)
    return processor


_PLAIN = (int, float, bool, str, tuple, list, frozenset, set, type(None))

_TRIGGER_OPTIONS = tuple(f.name for f in dataclasses.fields(Trigger))
"""Spec options that set the `Trigger` of a processor that takes one (`truncate:max_fraction=0.7`)."""


def _default_trigger(cls: Any) -> Trigger | None:
    """The `Trigger` a processor class starts from when it takes one (`trigger=`), else `None`."""
    if not dataclasses.is_dataclass(cls):
        return None
    for f in dataclasses.fields(cls):
        if f.name == "trigger":
            made = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            return made if isinstance(made, Trigger) else None
    return None


def _settable_options(cls: Any) -> list[str]:
    """Constructor options a spec may set: those with plain values (numbers, text, flags, lists)."""
    out = []
    for param in inspect.signature(cls).parameters.values():
        if param.name.startswith("_") or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = param.default
        if default is inspect.Parameter.empty or isinstance(default, _PLAIN):
            out.append(param.name)
    return out


def _parse_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    for convert in (int, float):
        try:
            return convert(text.replace("_", ""))
        except ValueError:
            pass
    if "+" in text:
        return tuple(v for v in (s.strip() for s in text.split("+")) if v)
    return text
