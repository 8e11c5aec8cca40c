"""The stream worker: how events get in and verdicts get out (Faust app, reader, processor, state table, outputs, metrics, settings)."""
