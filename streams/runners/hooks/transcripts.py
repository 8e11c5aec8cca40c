"""The prompt in progress of a Claude Code session, read from its transcript as Claude Code writes it.

Every Claude Code hook call names the session's transcript (``transcript_path``, the JSON Lines log
the Claude Code importer reads). Reading it, the gateway names a session's run exactly as the
importer does, ``<session_id>:<uuid of the last human prompt>``, whatever the gateway saw before:
a gateway restarted in the middle of a run, or another gateway process, carries on in the same
run. Each file is read incrementally (only the bytes written since the last call, complete lines
only), and only lines that can be ``user`` records are parsed.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict

from streams.importers.claude_code import is_prompt, prompt_key

__all__ = ["TranscriptPrompts"]


class TranscriptPrompts:
    """The uuid of the last human prompt of each transcript read so far.

    Arguments:
        max_files: transcripts remembered (least recently used forgotten; one is then read again
            from its start when asked).
    """

    def __init__(self, max_files: int = 10_000) -> None:
        self.max_files = max_files
        self._files: OrderedDict[str, list] = OrderedDict()  # path -> [inode, bytes read, last prompt uuid]

    def last_prompt(self, path: str) -> str | None:
        """The id (:func:`streams.importers.claude_code.prompt_key`) of the last human prompt (:func:`streams.importers.claude_code.is_prompt`) in the
        transcript at ``path``; None when it holds none yet.

        Raises:
            OSError: the transcript cannot be read (not on this machine, no permission, ...).
        """
        status = os.stat(path)
        entry = self._files.get(path)
        if entry is None or entry[0] != status.st_ino or status.st_size < entry[1]:
            entry = [status.st_ino, 0, None]  # new, replaced or rewritten: from the start
        if status.st_size > entry[1]:
            with open(path, "rb") as handle:
                handle.seek(entry[1])
                data = handle.read(status.st_size - entry[1])
            complete = data.rfind(b"\n") + 1  # a line still being written is read next time
            for line in data[:complete].splitlines():
                if b'"user"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and is_prompt(record):
                    entry[2] = prompt_key(record)
            entry[1] += complete
        self._files[path] = entry
        self._files.move_to_end(path)
        if len(self._files) > self.max_files:
            self._files.popitem(last=False)
        return entry[2]
