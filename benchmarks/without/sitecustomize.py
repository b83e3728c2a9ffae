"""Loaded at interpreter start (benchmarks/bench_command.py --without puts this folder first on PYTHONPATH):
the afpbench run without one piece of its start-up machinery, named by AFP_BENCH_WITHOUT, so the whole
command is measured with and without it in one sitting. Each piece is switched off right after its module
is imported (an import hook), so nothing is imported earlier than in a normal run.

    gate2   the fixture parse and validity gate on one process (gate_run.py never forks its helper)
    spool   fixture texts and parsed forms held in memory (fixtures/spool.py finds no temporary file)
    arenas  glibc's default malloc arenas (memory.limit_heap_arenas a no-op)
    freeze  no gc.freeze after the imports (memory.freeze_what_is_loaded a no-op)
    broker  kombu's own in-memory transport, polled every 10 ms (not workers/memory_broker.py's woken one)
    replay  every message built by Celery's send_task (not workers/message_replay.py's replay)

The prepared-fixture cache (AFP_CACHE_DIR=off) and the embedded pair (AFP_EMBEDDED_PROCESSES=1) have
settings of their own; bench_command.py sets those. Any other name fails the run.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import types

_PIECE = os.environ.get("AFP_BENCH_WITHOUT", "")


def _gate2(m):
    m.may_fork = lambda: False


def _spool(m):
    def no_file():
        raise OSError("benchmark: no spool file")
    m.tempfile = types.SimpleNamespace(TemporaryFile=no_file)


def _noop(name):
    def patch(m):
        setattr(m, name, lambda *a, **k: None)
    return patch


def _broker(m):
    from kombu.transport import memory
    m.Transport = memory.Transport


def _replay(m):
    def one_by_one(producer, messages, send_task, argsrepr_maxsize):
        for task_name, args, queue, label, options in messages:
            send_task(task_name, args=args, queue=queue, producer=producer,
                      **({"argsrepr": label} if label else {}), **(options or {}))
    m.publish_replayed = one_by_one


_PATCHES = {
    "gate2": ("afpbench.workers.sweeps.gate_run", _gate2),
    "spool": ("afpbench.fixtures.spool", _spool),
    "arenas": ("afpbench.workers.memory", _noop("limit_heap_arenas")),
    "freeze": ("afpbench.workers.memory", _noop("freeze_what_is_loaded")),
    "broker": ("afpbench.workers.memory_broker", _broker),
    "replay": ("afpbench.workers.message_replay", _replay),
}


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, module: str, patch) -> None:
        self.module, self.patch = module, patch

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        sys.meta_path.remove(self)
        from importlib.util import find_spec
        spec = find_spec(name)
        sys.meta_path.insert(0, self)
        loader, patch = spec.loader, self.patch

        class Patched(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                patch(module)

        spec.loader = Patched()
        return spec


if _PIECE:
    if _PIECE not in _PATCHES:
        raise SystemExit(f"AFP_BENCH_WITHOUT: unknown piece {_PIECE!r}")
    sys.meta_path.insert(0, _AfterImport(*_PATCHES[_PIECE]))
