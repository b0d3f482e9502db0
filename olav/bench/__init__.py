"""The evaluations that ship with olav and run on a user's set-up: ``olav bench steer`` (what
memory does to the workspace's own model, :mod:`olav.bench.steer`) and ``olav bench toolcalls``
(the rescue layer on the shipped corpora and on CanIToolCall, :mod:`olav.bench.toolcalls`,
:mod:`olav.bench.toolcall_suite`). The golden suite is olav.memory.golden; the project's own
benchmark harness is ``benchmarks/`` in the repository, outside the wheel."""
