"""loopwatch: OpenClaw's tool-loop detection, out of process, for a fleet of agent runners.

Where things live:

* :mod:`streams.detection` -- what counts as a loop (the pure engine, no I/O);
* :mod:`streams.worker` -- how events get in and verdicts get out (the Faust app);
* :mod:`streams.runners` -- how a runner asks (the client);
* :mod:`streams.wire` -- record formats and broker addresses every process shares;
* :mod:`streams.offline` -- replay and conformance without a broker;
* :mod:`streams.importers`, :mod:`streams.report`, :mod:`streams.commands` -- recorded
  sessions in, reports out, the ``loopwatch`` command line.

Modules that lay flat in this package before that layout are still importable under their old
names (``streams.client``, ``streams.codecs``, ...) for one release, with a
:class:`DeprecationWarning` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# Old flat module -> its home now. Kept for one release after the move.
_MOVED = {
    "streams.client": "streams.runners.client",
    "streams.codecs": "streams.wire.codecs",
    "streams.brokers": "streams.wire.brokers",
    "streams.logs": "streams.wire.logs",
    "streams.consumer": "streams.worker.consumer",
    "streams.reader": "streams.worker.reader",
    "streams.processor": "streams.worker.processor",
    "streams.table": "streams.worker.table",
    "streams.outputs": "streams.worker.outputs",
    "streams.keys": "streams.worker.keys",
    "streams.metrics": "streams.worker.metrics",
    "streams.settings": "streams.worker.settings",
    "streams.replay": "streams.offline.replay",
    "streams.conformance": "streams.offline.conformance",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path to the moved module itself (one object, so patches apply)."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: D102 (importlib protocol)
        if fullname not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):  # noqa: D102
        new = _MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):  # noqa: D102
        pass  # already executed under its new name


sys.meta_path.append(_MovedModuleFinder())
