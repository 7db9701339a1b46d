"""Provider-native compaction as a `Summarize` backend: Anthropic's and OpenAI's own summaries.

Two summarizers for `Summarize(summarizer=...)`, each calling the provider's compaction through the
official SDK client you pass (sync or async; the seam is the client, so tests, proxies and gateways
fit in):

- `AnthropicCompactionSummarizer`: Anthropic's on-demand compaction, a Messages API request with the
  `compaction={"type": "summarize"}` parameter (beta `compact-2026-09-04`). The response holds one
  signed `compaction` block whose `content` is a readable summary.
- `OpenAICompactionSummarizer`: OpenAI's `POST /responses/compact` (`client.responses.compact`).
  The output is the input's user messages followed by one `compaction` item whose
  `encrypted_content` only OpenAI can read.

What stays historykit's: the summary message, its `CompactionMarker` (`strategy="summarize"`,
`model` naming the backend: `anthropic-compaction:<model>`, `openai-compaction:<model>`), the
original transcript (untouched: the summary replaces the span in the view only, as any summary
does), the update of an earlier summary, and the fallback chain: a refused or failed native call is
retried, then the next summarizer of `Summarize(summarizer=[native, ...])` is tried, then the
history is truncated.

What each reader sees (the choice, in one place):

- The summary's **text** is what every reader but the writing provider sees: another provider (a
  fallback model), historykit's token counts, checks and stores. For Anthropic it is the summary the
  API wrote, completed as every summary is (`complete_summary`: the user's messages and constraints
  verbatim, the files edited). OpenAI's summary cannot be read, so the text is historykit's
  extractive summary of the same messages, headed by a line naming the encrypted item.
- The **block** (`SummaryPart.provider_compaction`) is sent to its own provider instead of the
  text, by the framework glue, at the model call: `HistoryKit` (Pydantic AI 2.x capability) adds it
  as the provider's `CompactionPart` in a response after the summary, which Pydantic AI sends to
  that provider only and which makes it drop what precedes it (as it does for its own
  `AnthropicCompaction` / `OpenAICompaction` capabilities); `HistoryKitMiddleware` (LangChain)
  sends the block in place of the summary and of what precedes it, when the chat model is that provider's
  (`ChatAnthropic`; `ChatOpenAI` on the Responses API), adding Anthropic's beta header. Any other
  model gets the text. Plain history processors (`Agent(history_processors=[...])`,
  `HistoryKitProcessor`, `HistoryKitHook`) send the text: they cannot tell which model is called.
- **Thinking** (models that bind it to the prefix, `historykit.BINDING_MODELS`): Anthropic keeps thinking
  in the turns kept after a compaction block valid only when the compaction request ran, on a
  binding model, on exactly the conversation those turns were produced after (same system prompt
  and tools, every message unchanged, thinking included). A summarizer sees neither the system
  prompt nor the tools, and is never shown thinking, so that cannot hold: the summary is an edit
  like any other, and the binding step drops the thinking after it in the same call, which is
  Anthropic's other documented way ("remove the thinking in the kept turns"). The messages sent to
  a compaction request carry no thinking, so the request itself never fails the prefix check.

Example:
    ```python
    import anthropic
    from historykit.processors import ExtractiveSummarizer, Summarize, Trigger
    from historykit.plugins.native_compaction import AnthropicCompactionSummarizer

    native = AnthropicCompactionSummarizer(anthropic.AsyncAnthropic(), model="claude-opus-5-5")
    at_80 = Trigger(max_fraction=0.8)
    Summarize(trigger=at_80, summarizer=[native])                           # native, else truncation
    Summarize(trigger=at_80, summarizer=[native, ExtractiveSummarizer()])   # native, else extractive
    ```
"""

from historykit.plugins._native_compaction import (
    ANTHROPIC_COMPACTION_BETA,
    AnthropicCompactionSummarizer,
    OpenAICompactionSummarizer,
    anthropic_messages,
    responses_input,
)

__all__ = [
    "ANTHROPIC_COMPACTION_BETA",
    "AnthropicCompactionSummarizer",
    "OpenAICompactionSummarizer",
    "anthropic_messages",
    "responses_input",
]
