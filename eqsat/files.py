"""Writing files whole or not at all, safe with two writers of one path.

Every writer in the project goes through :func:`write_atomic` (text) or :func:`replace_atomic`
(a writer callback): a uniquely named temp file in the target's folder, the umask's mode, then
one rename, so a killed run leaves no torn file and two processes never share a temp name.
:func:`check_outputs` is the one check every command runs on its output paths before it starts.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def not_a_file(path: str | Path) -> str | None:
    """Why ``path`` cannot be replaced by a written file ("a FIFO", "a symlink loop"), or None for a
    regular file or a new path: renaming over a device or a FIFO replaced it (as root, ``/dev/null``)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None  # a new path (or a dangling link, which the rename replaces, not its target)
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror or exc})"
    return next((what for test, what in _KINDS if test(mode)), None)


def replace_atomic(path: str | Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` on a fresh temp path beside ``path``, then rename it into place; on any
    error the temp file is removed and ``path`` is untouched. A ``path`` that is not a regular file
    (a device, a FIFO, a folder) is refused, never renamed over."""
    target = Path(path)
    why = not_a_file(target)
    if why is not None:
        raise ValueError(f"{target} is {why}, not a regular file; refusing to replace it")
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


TEMP_EXTRA = len("..") + 8 + len(".tmp")  # what replace_atomic's temp name adds to the target's name


def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def check_outputs(outputs: Mapping[str, str | Path | None], inputs: Mapping[str, str | Path | None]) -> None:
    """Refuse, before any work starts, an output path that would destroy an input or another
    output, or that cannot be written: keys are the flags that name the paths (``--json``).

    Checked: not an input file nor another output (symlinks and hard links resolved), a regular
    file or a new path (not a folder, a device, a FIFO, a symlink loop), its folder exists and is
    writable, and its name (with the temp name's extra characters) fits the file system, so a long
    name fails now and not after an hour's search."""
    given = {flag: Path(p) for flag, p in outputs.items() if p}
    sources = {flag: Path(p) for flag, p in inputs.items() if p and Path(p).is_file()}
    seen: dict[str, Path] = {}
    for flag, path in given.items():
        try:
            str(path).encode("utf-8")
        except UnicodeEncodeError:  # another encoding's bytes: the writers crashed on it after the work
            raise ValueError(f"{flag} {ascii(str(path))}: the name is not valid UTF-8; give a UTF-8 name") from None
        why = not_a_file(path)
        if why == "a folder":
            raise ValueError(f"{flag} {path} is a folder; give a file name")
        if why is not None:
            raise ValueError(f"{flag} {path} is {why}, not a regular file; give a file name")
        for other, src in sources.items():
            if _same(path, src):
                raise ValueError(f"{flag} {path} is the input {other} ({src}); write it to another file")
        for other, earlier in seen.items():
            if _same(path, earlier):
                raise ValueError(f"{flag} {path} is also {other}; give each output its own file")
        seen[flag] = path
        folder = path.resolve().parent
        if not folder.is_dir():
            raise ValueError(f"{flag} {path}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {path}: the folder {folder} is not writable")
        name_max = os.pathconf(folder, "PC_NAME_MAX") if hasattr(os, "pathconf") else 255
        if len(os.fsencode(path.name)) + TEMP_EXTRA > name_max:
            raise ValueError(f"{flag} {path}: the file name is {len(os.fsencode(path.name))} bytes long, the file "
                             f"system allows {name_max - TEMP_EXTRA} here")


def check_output_folders(folders: Mapping[str, str | Path | None], inputs: Mapping[str, str | Path | None]) -> None:
    """Refuse, before any work starts, an output folder that cannot be one: an existing file (an
    input among them), or a path under a file or under a folder that is not writable. A missing
    folder is fine (it is made with its parents); keys are the flags that name the folders."""
    sources = {flag: Path(p) for flag, p in inputs.items() if p and Path(p).is_file()}
    for flag, given in folders.items():
        if not given:
            continue
        path = Path(given)
        for other, src in sources.items():
            if _same(path, src):
                raise ValueError(f"{flag} {path} is the input {other}; give a folder for the outputs")
        if path.exists() and not path.is_dir():
            raise ValueError(f"{flag} {path} is a file, not a folder; give a folder for the outputs")
        existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise ValueError(f"{flag} {path}: {existing} is a file, so the folder cannot be made")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {path}: the folder {existing} is not writable")
