"""What a finished run achieved, for the audit log's ``runs.outcome``.

- ``cancelled``: the user stopped it; ``failed``: an error ended it.
- ``tool_error``: it finished although tool calls failed.
- ``narrated``: no tool was called (delegating with ``task`` does not count), the request is
  not a question, and it asked for an action or an artifact ("back up", "save", "export",
  "create a report", 备份, 保存, 导出, 生成报告 ...), or a directive recalled for the run names a
  tool (a guide counts only when the request has one of its keywords). This is the commonest
  failure of small models: "I will now back up the configs..." with no tool call.
- ``completed``: everything else.

Pure functions only: the runner gathers the inputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from olav.memory.ingest.capture import ToolEvent, failed
from olav.memory.store.schema import MemoryRecord

DELEGATION = "task"  # handing work to a sub-agent is not doing it
DIRECTIVE_CATEGORIES = frozenset({"usage_guide", "expert_knowledge", "reflection"})

# verbs that ask for a side effect whatever their object
_ACT_EN = (
    r"back\s*-?\s*up|save|export|snapshot|dump|store|archive|deploy|push|register|restart|"
    r"reboot|delete|remove|upload|download"
)
_ACT_ZH = r"备份|保存|存档|存一下|导出|快照|部署|下发|注册|重启|删除|上传|下载|归档"
# verbs that ask for an artifact only when their object is one ("write a poem" is not)
_MAKE_EN = r"create|generate|write|make|build|draw|produce|draft|prepare"
_MAKE_ZH = r"生成|创建|新建|写|制作|画|做|起草|准备"
_ARTIFACT_EN = (
    r"file|script|report|document|doc|diagram|chart|plan|config(?:uration)?s?|backups?|"
    r"snapshots?|csv|json|markdown|md|table|spreadsheet|runbook|playbook|template|export"
)
_ARTIFACT_ZH = r"文件|脚本|报告|文档|图|表|计划|方案|配置|备份|快照|清单|模板|手册"


def _word(alternatives: str) -> str:
    """English words inside text that may run into Chinese ("帮我back up配置")."""
    return rf"(?<![a-z])(?:{alternatives})(?![a-z])"


_ACTION = re.compile(
    rf"{_word(_ACT_EN)}|{_ACT_ZH}"
    rf"|{_word(_MAKE_EN)}[^.?!\n]{{0,40}}?{_word(_ARTIFACT_EN)}"
    rf"|(?:{_MAKE_ZH}).{{0,12}}?(?:{_ARTIFACT_ZH})",
    re.I,
)
_POLITE = re.compile(
    r"^\s*(?:please|pls|kindly|can you|could you|would you|will you|go ahead|let'?s|"
    r"i (?:need|want) you to)\b|请|帮我|帮忙|麻烦|给我",
    re.I,
)
_WH = re.compile(
    r"^\s*(?:(?:so|and|but|ok|okay|hey|hi)[,\s]+)?"
    r"(?:what|why|how|when|where|who|whom|which|whose|is|are|was|were|does|did|do|should|"
    r"explain|describe)\b",
    re.I,
)
_ZH_QUESTION = re.compile(r"什么|为什么|为何|怎么|怎样|如何|哪|是否|多少|多久|吗\s*$|呢\s*$")
# tried only where a run of [a-z0-9] starts, so a long word is read once, not once per offset
_IDENT = re.compile(r"(?<![a-z0-9])[0-9]*+([a-z][a-z0-9]*+(?:_[a-z0-9]++)+)")


def asks_for_action(request: str) -> bool:
    """The request asks for a side effect or an artifact (EN, ZH or mixed)."""
    return bool(_ACTION.search(request))


def is_question(request: str) -> bool:
    """A question to answer in words ("what is BGP", "BGP 是什么"), not a polite request
    ("can you back up ...?", "请帮我备份 ...")."""
    text = request.strip()
    if _POLITE.search(text):
        return False
    return bool(_WH.search(text) or text.endswith(("?", "？")) or _ZH_QUESTION.search(text))


# an answer that announces, starts or claims an action instead of calling the tool for it:
# "I'll back up ...", "Let me query ...", "Calling take_snapshot ...", "我现在导出 ...",
# "正在查询 ...". Offers ("I can ..."), requests for detail ("let me know") and explanations
# ("let me explain") are answers, not narration.
_NOT_ACTS = (
    r"know|explain|clarify|summari[sz]e|recap|describe|answer|help|see if i understand|"
    r"be clear|walk you through|break (?:it|this) down|illustrate|point out|note"
)
_ANNOUNCE_EN = re.compile(
    r"(?:^|[.!?:\n]|\b(?:sure|ok(?:ay)?|understood|alright|got it|right|great)\b[,.!]?)"
    r"[ \t\-—–*]{0,4}"
    r"(?:(?:first|next|now|then)[,:]?[ \t]{1,3}|next step:[ \t]{0,3})?"
    r"(?:i(?:'ll|’ll| will| shall| am going to|'m going to|’m going to)"
    r"|let me|let's|let us|now i(?:'ll| will)?)"
    rf"[ \t]{{1,3}}(?:now[ \t]{{1,3}}|first[ \t]{{1,3}}|then[ \t]{{1,3}}|go ahead and[ \t]{{1,3}})?"
    rf"(?!(?:{_NOT_ACTS})\b)[a-z]",
    re.I,
)
_STARTS_EN = re.compile(
    r"(?:^|\n)[ \t\-—–*]{0,4}(?:calling|running|executing|searching|querying|fetching|"
    r"exporting|saving|backing up|creating|taking|checking|starting|proceeding|listing|pinging|"
    r"restoring|applying|deploying|restarting|writing|looking up)\b",
    re.I,
)
_CLAIMS_EN = re.compile(
    r"\bi(?:'ve|’ve| have)[ \t]{1,3}(?:now[ \t]{1,3}|just[ \t]{1,3}|successfully[ \t]{1,3})?"
    r"(?:backed up|saved|exported|created|written|taken|run|ran|called|stored|updated|"
    r"deleted|restarted|deployed|uploaded|applied|recorded)\b"
    r"|\b(?:has|have) been (?:successfully )?(?:saved|exported|backed up|created|written|"
    r"stored|deployed|uploaded|applied|recorded)\b"
    r"|^[ \t]{0,4}done\b[.:!]",
    re.I,
)
_ANNOUNCE_ZH = re.compile(
    r"我(?:现在|将|马上|这就|立即|立刻|先|来|会(?:调用|依次|先|马上))|让我|正在|接下来我|"
    r"请稍候|稍等|已(?:经)?(?:为您|帮你|帮您)?(?:备份|保存|导出|创建|生成|写入|记录|执行|调用)"
)


def narrates(answer: str, offered: Iterable[str] = ()) -> bool:
    """The answer announces, starts or claims an action ("I'll back up ...", "Calling
    take_snapshot ...", "我现在导出 ...") or names a tool it was offered, instead of calling it.
    The nudge asks again only for such an answer: a plain one ("Noted.", a summary, an
    explanation, a question back) is left as it is."""
    head = answer.strip()[:600]
    if not head:
        return False
    if _ANNOUNCE_EN.search(head) or _STARTS_EN.search(head) or _CLAIMS_EN.search(head):
        return True
    if _ANNOUNCE_ZH.search(head):
        return True
    known = set(offered)
    return bool(known) and any(name in known for name in _IDENT.findall(head.lower()))


@dataclass(frozen=True)
class Directive:
    """A directive recalled for a run: what the model saw of it, and for a guide its
    trigger words (a guide recalled for a request that has none of them does not count;
    lessons and patterns have no trigger words and count when recalled)."""

    text: str
    keywords: tuple[str, ...] = ()

    def applies_to(self, request: str) -> bool:
        low = request.lower()
        return not self.keywords or any(k.lower() in low for k in self.keywords)


def directive(record: MemoryRecord) -> Directive:
    """A recalled memory as the classifier needs it: the body the model saw, and a guide's
    keywords."""
    meta = record.metadata
    keywords = meta.get("keywords") if record.category == "usage_guide" else None
    body = str(meta.get("body") or record.text)
    return Directive(body, tuple(str(k) for k in keywords or ()))


def named_tools(directives: Iterable[Directive], request: str, tools: Iterable[str]) -> list[str]:
    """The ``tools`` named by the directives that apply to ``request``, sorted."""
    known = set(tools)
    return sorted(
        {
            name
            for d in directives
            if d.applies_to(request)
            for name in _IDENT.findall(d.text.lower())
            if name in known
        }
    )


def classify(
    status: str, request: str, events: Sequence[ToolEvent], named: Sequence[str] = ()
) -> str:
    """The outcome of a run that ended with ``status`` (completed, error or cancelled)."""
    if status == "cancelled":
        return "cancelled"
    if status != "completed":
        return "failed"
    if any(failed(ev) for ev in events):
        return "tool_error"
    if any(ev.tool != DELEGATION for ev in events) or is_question(request):
        return "completed"
    return "narrated" if asks_for_action(request) or named else "completed"
