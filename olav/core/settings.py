"""The one declared registry of configuration keys and ``OLAV_*`` environment variables.

Every key in ``olav.yaml`` is declared here with its type, default and documentation, and each
maps to exactly one environment variable (``llm.base_url`` -> ``OLAV_LLM_BASE_URL``). Process
variables that are not configuration keys (``OLAV_HOME``, ``OLAV_DEBUG`` ...) are declared in
:data:`PROCESS_VARS`. A test asserts that no other module reads an ``OLAV_`` literal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    key: str
    type: type
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None

    @property
    def env(self) -> str:
        return "OLAV_" + self.key.upper().replace(".", "_")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "llm.provider",
        str,
        "ollama",
        "Chat model backend: ollama, openai (any OpenAI-compatible server) or scripted "
        "(replays a script; for tests and demos only).",
        ("ollama", "openai", "scripted"),
    ),
    Setting("llm.model", str, "qwen3:8b", "Chat model name, e.g. qwen3:8b or qwen3:30b-a3b."),
    Setting("llm.base_url", str, "http://localhost:11434", "Where the chat model server listens."),
    Setting(
        "llm.api_key_env",
        str,
        "OPENAI_API_KEY",
        "Name of the environment variable that holds the API key (openai provider only).",
    ),
    Setting("llm.thinking", bool, True, "Keep the model's thinking mode on."),
    Setting("llm.num_ctx", int, 16384, "Context window requested from Ollama."),
    Setting("llm.num_predict", int, 4096, "Maximum tokens generated per call."),
    Setting("llm.temperature", float, 0.2, "Sampling temperature."),
    Setting(
        "llm.tier",
        str,
        "auto",
        "small, medium, large, or auto (from the model name).",
        ("auto", "small", "medium", "large"),
    ),
    Setting("llm.script", str, "", "Path of the script replayed by the scripted provider."),
    Setting(
        "embedder.provider",
        str,
        "e5",
        "Embedder: e5 (bundled, offline), ollama, openai, or hash (tests only).",
        ("e5", "ollama", "openai", "hash"),
    ),
    Setting(
        "embedder.model",
        str,
        "multilingual-e5-small",
        "Embedding model name (e.g. bge-m3 for ollama, text-embedding-3-small for openai).",
    ),
    Setting(
        "embedder.base_url", str, "", "Embedding server URL (ollama/openai). Empty: the LLM's."
    ),
    Setting(
        "embedder.api_key_env",
        str,
        "OPENAI_API_KEY",
        "Environment variable holding the embedding API key (openai provider only).",
    ),
    Setting("embedder.cache_size", int, 256, "Query embeddings kept in the LRU cache."),
    Setting(
        "embedder.window",
        int,
        0,
        "The embedder's window in tokens: text beyond it is not embedded. 0: the model "
        "family's (e5 512, bge-m3 8192, nomic-embed 2048, OpenAI text-embedding 8191, else 512).",
    ),
    Setting(
        "reranker.provider",
        str,
        "none",
        "A cross-encoder reranker on your own server that scores recall's candidates: none, "
        "or rerank (llama.cpp --reranking, vLLM, text-embeddings-inference, Infinity).",
        ("none", "rerank"),
    ),
    Setting("reranker.base_url", str, "http://127.0.0.1:8080", "The rerank server's address."),
    Setting("reranker.model", str, "", "The reranker's model name (bge-reranker-v2-m3, ...)."),
    Setting(
        "reranker.api",
        str,
        "rerank",
        "Its dialect: rerank (Jina/Cohere: llama.cpp, vLLM, Infinity), tei, or score (vLLM).",
        ("rerank", "tei", "score"),
    ),
    Setting("reranker.path", str, "", "The endpoint's path; empty: the dialect's usual one."),
    Setting(
        "reranker.api_key_env",
        str,
        "",
        "Environment variable holding the reranker's API key; empty: none is sent.",
    ),
    Setting(
        "reranker.scores",
        str,
        "auto",
        "What its scores are: probability (TEI, vLLM, Infinity), logit (llama.cpp's raw "
        "output), or auto (an answer with a score outside 0..1 is logits).",
        ("auto", "probability", "logit"),
    ),
    Setting(
        "reranker.floors",
        str,
        "auto",
        "When its score decides: auto = calibrated by `olav memory calibrate` (until then "
        "memory.policy.second_look.uncalibrated: 0.9 and above injects, below 0.02 leaves "
        "out); off = scores shown only; or two numbers, ACCEPT REJECT.",
    ),
    Setting(
        "reranker.timeout_ms",
        int,
        800,
        "Longest wait for the reranker; slower, and recall keeps the bundled decision.",
    ),
    Setting("memory.token_budget", int, 1000, "Token budget of the <relevant-memories> block."),
    Setting("memory.rrf_k", int, 20, "The k constant of reciprocal-rank fusion."),
    Setting(
        "memory.relevance",
        str,
        "auto",
        "When a memory is relevant enough to inject: auto = floors calibrated for the "
        "embedder; off = the nearest memories, relevant or not; or six numbers "
        "(directive, directive named in words, in specific words, lesson, lesson with "
        "words, spread).",
    ),
    Setting(
        "memory.judge",
        str,
        "off",
        "Close calls (a margin near its floor) asked of the chat model in one short call per "
        "request: off, or model. On any failure the floors decide.",
        ("off", "model"),
    ),
    Setting(
        "memory.judge_band",
        float,
        0.01,
        "How near its floor a margin must be for the judge to decide it (margin units; "
        "e5's margins span about 0.06).",
    ),
    Setting(
        "memory.judge_timeout_ms",
        int,
        2000,
        "Longest wait for the judge's verdict; slower, and the floors decide.",
    ),
    Setting(
        "memory.second_opinion",
        str,
        "auto",
        "Whether a lesson's relevance also asks a second, bundled encoder (multilingual "
        "USE): auto = when it is installed; off = the embedder alone (about 117 MB less).",
        ("auto", "off"),
    ),
    Setting(
        "memory.relevance_model",
        str,
        "off",
        "Who decides whether a guide applies: off = the calibrated floors; on = the shipped "
        "learned model, for the embedder it was fitted on (bundled e5).",
        ("on", "off"),
    ),
    Setting(
        "memory.dedup_distance",
        str,
        "auto",
        "A new lesson this close (squared L2) to an existing one is skipped; auto = "
        "calibrated for the embedder.",
    ),
    Setting(
        "memory.half_life_days",
        float,
        30.0,
        "Days after which an unused agent-made memory counts half in ranking (0 = no decay).",
    ),
    Setting(
        "memory.ann_threshold",
        int,
        10000,
        "Rows after which an ANN (IVF_SQ) vector index is built.",
    ),
    Setting(
        "memory.uri",
        str,
        "",
        "Where the memory table lives. Empty: memory.lance under paths.databases; or "
        "s3://bucket/prefix for a table the team shares (credentials from AWS_* variables).",
    ),
    Setting(
        "memory.storage_options.endpoint",
        str,
        "",
        "S3-compatible endpoint URL (MinIO, Ceph, R2); empty for AWS S3.",
    ),
    Setting("memory.storage_options.region", str, "", "Bucket region; empty: AWS_REGION."),
    Setting(
        "memory.storage_options.allow_http",
        bool,
        False,
        "Allow a plain-http endpoint (a MinIO on a private network).",
    ),
    Setting(
        "memory.refresh_seconds",
        float,
        1.0,
        "A team table (memory.uri): reads reuse the table version they saw for this long "
        "before checking for other machines' writes (0 = check on every read). Writes "
        "always start from the latest version.",
    ),
    Setting(
        "memory.user",
        str,
        "",
        "Your name in user:<name> scopes (private captures and lessons); empty: the login name.",
    ),
    Setting(
        "memory.team",
        str,
        "",
        "The team whose team:<name> memories recall reads; empty: no team scope.",
    ),
    Setting(
        "runtime.salvage",
        bool,
        True,
        "Run tool calls the model wrote as text (olav.runtime.rescue); off: show them as text.",
    ),
    Setting(
        "runtime.nudge",
        bool,
        True,
        "Re-prompt the model once, naming the tool, when it only narrated an action.",
    ),
    Setting(
        "runtime.reask",
        bool,
        True,
        "Ask once more, with the engine's constrained decoding, for a call olav could not "
        "read safely (cut off, unclosed, or arguments that fail its schema).",
    ),
    Setting(
        "runtime.loop_limit",
        int,
        3,
        "Identical tool calls (same name and arguments) in one run before the loop guard acts.",
    ),
    Setting("runtime.max_model_calls", int, 24, "Model calls one run may make before it stops."),
    Setting(
        "threads.uri",
        str,
        "",
        "Where threads live: empty for the workspace's threads.sqlite, or postgresql://USER@HOST"
        ":PORT/DBNAME for a database a team's processes share (pip install 'olav[postgres]').",
    ),
    Setting(
        "serve.runs_per_operator",
        int,
        4,
        "Runs one operator may have running at once on olav serve (of its 32 run slots).",
    ),
    Setting(
        "serve.run_queue",
        int,
        8,
        "Runs one operator may have waiting for a slot; past that a new run is answered 429.",
    ),
    Setting(
        "serve.sessions_per_operator",
        int,
        20,
        "Console sessions one operator may hold; a new login ends their own oldest.",
    ),
    Setting(
        "serve.logins_per_minute",
        int,
        30,
        "Console logins one client address may try per minute; past that 429.",
    ),
    Setting(
        "serve.max_connections",
        int,
        1000,
        "Open connections olav serve keeps; past it the oldest one without a whole request "
        "head is closed (bounded by the process's file limit).",
    ),
    Setting(
        "serve.head_timeout_s",
        float,
        10.0,
        "Seconds a connection may take to send a whole request head before it is closed.",
    ),
    Setting(
        "serve.client_tools",
        str,
        "passthrough",
        "A /v1/chat/completions request with tools: passthrough (olav is the model of the "
        "client's own loop, with recall and the rescue layer) or refuse (a 400).",
        ("passthrough", "refuse"),
    ),
    Setting(
        "serve.allowed_hosts",
        str,
        "",
        "Host headers olav serve answers beyond 127.0.0.1, localhost and its bound address: "
        "names or name:port, comma-separated (the name a proxy or DNS gives it).",
    ),
    Setting("paths.databases", str, ".olav/databases", "Folder of memory.lance and audit.duckdb."),
    Setting("paths.logs", str, ".olav/logs", "Log folder."),
    Setting("paths.exports", str, "exports", "Where artifacts and exports are written."),
)

_MINIMUMS = {
    "llm.num_ctx": 512,
    "llm.num_predict": 16,
    "llm.temperature": 0,
    "embedder.cache_size": 0,
    "embedder.window": 0,
    "reranker.timeout_ms": 1,
    "memory.judge_timeout_ms": 1,
    "memory.judge_band": 0,
    "memory.token_budget": 100,
    "memory.rrf_k": 1,
    "memory.half_life_days": 0,
    "memory.ann_threshold": 256,
    "memory.refresh_seconds": 0,
    "runtime.loop_limit": 2,
    "runtime.max_model_calls": 2,
    "serve.runs_per_operator": 1,
    "serve.run_queue": 0,
    "serve.sessions_per_operator": 1,
    "serve.logins_per_minute": 1,
    "serve.max_connections": 16,
    "serve.head_timeout_s": 0.1,
}
SETTINGS = tuple(
    Setting(s.key, s.type, s.default, s.doc, s.choices, _MINIMUMS.get(s.key)) for s in SETTINGS
)
SETTINGS_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
AGENT_OVERRIDE_KEYS = ("model",)

# Environment variables that are not olav.yaml keys.
PROCESS_VARS: dict[str, str] = {
    "OLAV_HOME": "Workspace root. Without it, the nearest parent directory holding .olav/.",
    "OLAV_DEBUG": "Set to 1 to print full tracebacks.",
    "OLAV_ENGINE_HOME": (
        "The folder of `olav engine` (llama.cpp's server and SmolLM2), shared by every "
        "workspace. Default: ~/.cache/olav/engine."
    ),
    "OLAV_ALLOW_DESTRUCTIVE_DIM_MIGRATION": (
        "Set to 1 to let olav drop and recreate the memory table when the embedder dimension "
        "changes. Destroys every row; prefer `olav kb re-embed`."
    ),
}
