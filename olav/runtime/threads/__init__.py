"""Conversations that last: every conversation is a thread, kept in one SQLite file under
``.olav/databases/threads.sqlite``, or, for a team whose servers share their threads, in a
PostgreSQL database (``threads.uri: postgresql://…``).

Three things share that file (or database):

- **LangGraph's checkpoints** (``langgraph-checkpoint-sqlite``): the agent graph's state after
  every step, which is what the model sees when a thread continues. A ``kill -9`` mid-run leaves
  the thread at its last completed step.
- **olav's index of threads** (``olav_threads``, ``olav_turns``): who a thread belongs to, its
  name, its turns as text for listing, showing and searching without unpickling checkpoints,
  and the claim that makes a thread run one run at a time.
- **what others keep per thread**: the runs of ``olav serve``, which the server declares and
  migrates itself (:mod:`olav.serve.records`, through
  :meth:`ThreadStore.keep_beside`); the engine knows only that an ``olav_*`` table with a
  ``thread_id`` column goes with its thread.

One active run per thread (the Agent Protocol's rule): :meth:`ThreadStore.claim` takes the thread
in an immediate transaction, so a second process that tries to run it at the same moment gets
:class:`ThreadBusyError`. A claim left by a process that died (``kill -9``) is taken over once
that process is gone.

The file is opened in WAL mode with a busy timeout, so processes that write at once wait for each
other instead of failing. In PostgreSQL the claim is also a session advisory lock held by the
claiming process's connection: the server drops it the moment that process dies, on whatever
machine it ran, so a crashed host's claim is taken over at once instead of holding forever.

The schema carries a version (``olav_meta``): a file from an older olav, or one that holds only
checkpoints, is migrated in place, and its threads are indexed from the checkpoints; nothing is
dropped (version 1 is the index of threads; versions 2 and 3 were olav serve's runs, which
the server now sets up itself). Processes that set up a new PostgreSQL
database at once take turns (an advisory lock).

Thread ids are per owner: two operators of one ``olav serve`` may each have a thread
``payroll-2026``, and neither can tell that the other has one. A thread's key (``id``: what its
checkpoints, turns and runs are stored under) is the id it was given, unless another owner's
thread had that key first: then it gets a key of its own and ``known_as`` keeps the id
(:meth:`ThreadStore.insert`, in one transaction; :meth:`ThreadStore.owned` finds an owner's
thread by its id). olav serve shows a client only the id it gave.

Deleting a thread deletes its checkpoints, its turns and whatever is kept beside it (its
runs), whichever client deletes it, so an id taken again later shows nothing of its earlier
owner.

The package: :mod:`.model` (threads, turns, hits, errors), :mod:`.schema` (the tables and their
version), :mod:`.backend` (what the store asks of a database) with :mod:`.sqlite` and
:mod:`.postgres` behind it, and :mod:`.store` (the ThreadStore).
"""

from olav.runtime.threads.model import (
    PREVIEW_CHARS,
    ThreadBusyError,
    ThreadHit,
    ThreadInfo,
    ThreadNotFoundError,
    Turn,
    new_thread_id,
)
from olav.runtime.threads.postgres import check_uri, postgres_where
from olav.runtime.threads.schema import SCHEMA_VERSION
from olav.runtime.threads.store import ThreadStore

__all__ = [
    "PREVIEW_CHARS",
    "SCHEMA_VERSION",
    "ThreadBusyError",
    "ThreadHit",
    "ThreadInfo",
    "ThreadNotFoundError",
    "ThreadStore",
    "Turn",
    "check_uri",
    "new_thread_id",
    "postgres_where",
]
