"""loopwatch: OpenClaw's tool-loop detection, out of process, for a fleet of agent runners.

Where things live:

* :mod:`streams.detection` -- what counts as a loop (the pure engine, no I/O);
* :mod:`streams.worker` -- how events get in and verdicts get out (the Faust app);
* :mod:`streams.runners` -- how a runner asks (the client);
* :mod:`streams.wire` -- record formats and broker addresses every process shares;
* :mod:`streams.offline` -- replay and conformance without a broker;
* :mod:`streams.importers`, :mod:`streams.report`, :mod:`streams.commands` -- recorded
  sessions in, reports out, the ``loopwatch`` command line.

docs/layout.md has the map module by module.
"""
