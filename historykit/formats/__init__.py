"""Transcript files: read any of five formats into neutral messages, and write them back.

| format | file | read by |
|---|---|---|
| `chat` | OpenAI chat-completions messages, one JSON object a line (the corpus's format) | `openai_chat` |
| `pydantic-ai` | `ModelMessagesTypeAdapter.dump_json(messages)` | `pydantic_ai_json` |
| `langchain` | `json.dumps(messages_to_dict(messages))` | `langchain_json` |
| `claude-code` | a Claude Code session log (`~/.claude/projects/...`) | `claude_code` |
| `codex` | a Codex CLI rollout (`~/.codex/sessions/.../rollout-*.jsonl`) | `codex` |

`read_transcript(path)` detects the format from the content (`detect`), or takes it as `format=`.
Pydantic AI and LangChain files also keep their native messages (`TranscriptFile.native`); the
agent logs keep their rows on each message (`Message.native`), so a processed history is written
back in its own format with everything a processor did not touch (`write_transcript`). What the
agent logs record besides the messages (the model, the window, the agent's own compactions, what
the calls sent that the log lacks) is read by `historykit.analysis` and `historykit analyze`.

Example:
    ```python
    import historykit
    from historykit.formats import read_transcript, write_transcript

    transcript = read_transcript("session.jsonl")            # format detected
    result = historykit.default_pipeline().run(transcript.history, context_window=32_000)
    write_transcript(result.messages, "compacted.jsonl", transcript.format)
    ```
"""

from historykit.formats._detect import FORMATS, TranscriptFormatError, resolve_format
from historykit.formats._files import TranscriptFile, detached, read_transcript, write_transcript
from historykit.formats._openai_chat import read_chat_jsonl
from historykit.formats._recorded import compaction_boundaries

__all__ = [
    "FORMATS",
    "TranscriptFile",
    "TranscriptFormatError",
    "compaction_boundaries",
    "detached",
    "read_chat_jsonl",
    "read_transcript",
    "resolve_format",
    "write_transcript",
]
