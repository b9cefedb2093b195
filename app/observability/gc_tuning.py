"""The garbage collector of a long-running Strata process (`strata serve`, `strata worker`).

At default settings Python's cyclic collector costs a worker ~1.3 ms of CPU per one-request
turn (the capacity benchmark shows it): its youngest generation is collected every
700 net allocations of container objects, and every full collection walks every object
the process has, among them the ~300,000 that imports and start-up made and that live as
long as the process (modules, functions, pydantic's and SQLAlchemy's schemas). So once the
process is set up, what exists is collected once and then frozen (`gc.freeze`: left out
of every later collection), and the youngest generation is collected every
`STRATA_GC_THRESHOLD` allocations instead. Reference counting still frees everything that
is not in a cycle at once; only cyclic garbage waits a little longer.

Done by the CLI only, never on import: a test process builds and drops many apps, and
frozen objects are never collected.
"""

from __future__ import annotations

import gc

from app.settings import Settings


def tune_gc(settings: Settings) -> None:
    """Freeze what start-up made and space the young collections; once, after set-up."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(settings.gc_threshold, older, oldest)
