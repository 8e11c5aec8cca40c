"""The gateway's bearer token: where it is kept, made on the gateway's first start, read by the hooks.

Standard library only: ``loopwatch hook`` (:mod:`streams.runners.hooks.command`) reads it on every
tool call and must start fast.

Where the token comes from, first match wins (gateway and command hook alike):

1. ``LOOPWATCH_GATEWAY_TOKEN`` (the environment);
2. the token file: ``LOOPWATCH_GATEWAY_TOKEN_FILE`` when set, else
   ``$XDG_CONFIG_HOME/loopwatch/gateway-token`` (``~/.config/loopwatch/gateway-token`` when
   ``XDG_CONFIG_HOME`` is unset).

The gateway writes the file when neither exists (:func:`gateway_token`): 32 random bytes as 43
URL-safe characters, the file created with mode 0600 (only its owner reads it) in a directory
created with mode 0700. The OpenClaw plugin reads the same file (openclaw-plugin/src/config.js).
"""

from __future__ import annotations

import os

__all__ = ["TOKEN_ENV", "TOKEN_FILE_ENV", "token_path", "read_token", "gateway_token", "TokenFileError"]

TOKEN_ENV = "LOOPWATCH_GATEWAY_TOKEN"
TOKEN_FILE_ENV = "LOOPWATCH_GATEWAY_TOKEN_FILE"


class TokenFileError(OSError):
    """The token file cannot be read or written, or another user can read it; ``str()`` says which."""


def token_path(env: os._Environ | dict[str, str] | None = None) -> str:
    """The token file's path: ``LOOPWATCH_GATEWAY_TOKEN_FILE``, else ``<XDG config dir>/loopwatch/gateway-token``."""
    env = os.environ if env is None else env
    if env.get(TOKEN_FILE_ENV):
        return os.path.expanduser(env[TOKEN_FILE_ENV])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "loopwatch", "gateway-token")


def read_token(env: os._Environ | dict[str, str] | None = None) -> str | None:
    """The token a client sends: ``LOOPWATCH_GATEWAY_TOKEN``, else the token file's first line, else None
    (no file, or one that cannot be read: the gateway's 401 then says a token is missing)."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return env[TOKEN_ENV]
    try:
        with open(token_path(env), encoding="utf-8") as file:
            text = file.read(4096)
    except (OSError, UnicodeDecodeError):
        return None
    return text.strip().split("\n", 1)[0].strip() or None


def gateway_token(env: os._Environ | dict[str, str] | None = None) -> tuple[str, str]:
    """The token the gateway asks for, and where it came from (``"LOOPWATCH_GATEWAY_TOKEN"``, or the
    file's path, with ``" (created)"`` when this call made it).

    Raises:
        TokenFileError: the file exists but is empty, cannot be read, or is readable by other users
            (mode beyond 0600); or it cannot be created.
    """
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return env[TOKEN_ENV], TOKEN_ENV
    path = token_path(env)
    try:
        return _read_own(path), path
    except FileNotFoundError:
        pass
    import secrets  # here: the command hook reads tokens on every tool call and need not import it

    token = secrets.token_urlsafe(32)
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        # O_EXCL: two gateways starting together do not overwrite each other's token.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_own(path), path
    except OSError as exc:
        raise TokenFileError(f"cannot create the gateway token file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token, f"{path} (created)"


def _read_own(path: str) -> str:
    """The token in ``path``. Raises FileNotFoundError, or TokenFileError (unreadable, empty, open to others)."""
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="utf-8") as file:
            text = file.read(4096)
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"cannot read the gateway token file {path}: {exc}") from None
    if os.name == "posix" and mode & 0o077:
        raise TokenFileError(f"the gateway token file {path} can be read by other users (mode {mode & 0o777:o}); "
                             f"chmod 600 it")
    token = text.strip().split("\n", 1)[0].strip()
    if not token:
        raise TokenFileError(f"the gateway token file {path} is empty; delete it to have a new token made")
    return token
