"""Writing files whole or not at all, safe with two writers of one path.

Every writer in the project goes through :func:`write_atomic` (text) or :func:`replace_atomic`
(a writer callback): a uniquely named temp file in the target's folder, the umask's mode, then
one rename, so a killed run leaves no torn file and two processes never share a temp name.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def replace_atomic(path: str | Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` on a fresh temp path beside ``path``, then rename it into place; on any
    error the temp file is removed and ``path`` is untouched."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    replace_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
