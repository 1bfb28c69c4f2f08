"""Files that hold a secret: created, never adopted; read only when private.

The kernel writes a secret (a principal's credential, an attempt's capability token)
only to a file it creates itself: ``create`` opens it with ``O_CREAT | O_EXCL |
O_WRONLY | O_NOFOLLOW`` and mode 0600 (set again with ``fchmod``, whatever the umask),
so a file or a symlink planted at that path beforehand is refused with the reason and
never written to: whoever planted it learns nothing. A secret is read only from a
regular file that is not readable by group or others (as ssh refuses a private key),
unless the caller says otherwise (``insecure``); a file that is missing, a directory,
empty, too large, not UTF-8 or not one line is refused too. Every refusal is a
``SecretFileError`` whose message is one line naming the path.
"""
from __future__ import annotations

import os
import stat

#: The most a secret file may hold (a credential is a name and 43 characters).
MOST_BYTES = 64 * 1024
#: How a secret file is created: exclusively, never through a symlink, write only.
CREATE_FLAGS = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW
PRIVATE = 0o600


class SecretFileError(ValueError):
    """A secret file that cannot be created or read (one line, naming the path)."""


class Reserved:
    """A secret file created (empty, 0600) before its secret exists: ``write`` fills it
    through the descriptor that created it, ``discard`` removes it when no secret came."""

    def __init__(self, path: str, fd: int):
        self.path, self.fd, self.written = path, fd, False

    def write(self, text: str) -> None:
        try:
            os.write(self.fd, (text + "\n").encode("utf-8"))
            self.written = True
        finally:
            self.close()

    def discard(self) -> None:
        """Remove the file unless its secret was written (a secret in use is never lost)."""
        self.close()
        if not self.written:
            remove_created(self.path)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def reserve(path: str, *, what: str = "secret file") -> Reserved:
    """Create ``path`` empty, mode 0600, exclusively and never through a symlink; refuse an
    existing file or symlink, naming the reason."""
    try:
        fd = os.open(path, CREATE_FLAGS, PRIVATE)
    except FileExistsError:
        kind = " (a symlink)" if os.path.islink(path) else ""
        raise SecretFileError(f"{path}: the {what} exists already{kind} (refused: a secret is "
                              "written only to a file created for it; remove it or name "
                              "another)") from None
    except OSError as e:
        raise SecretFileError(f"{path}: cannot create the {what}: {e.strerror}") from None
    try:
        os.fchmod(fd, PRIVATE)
    except OSError:
        os.close(fd)
        raise
    return Reserved(path, fd)


def create(path: str, text: str, *, what: str = "secret file") -> None:
    """Create ``path`` mode 0600 holding ``text`` and a newline (``reserve``)."""
    reserve(path, what=what).write(text)


def remove_created(path: str) -> None:
    """Remove a secret file ``create`` made whose secret was never used."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read(path: str, *, what: str = "secret file", insecure: bool = False) -> str:
    """The one line a secret file holds; ``SecretFileError`` (one line naming the path) when
    it is missing, not a regular file, readable by group or others (unless ``insecure``),
    empty, too large, not UTF-8 or more than one line."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise SecretFileError(f"{path}: {what} unreadable: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SecretFileError(f"{path}: {what} is not a regular file")
        if st.st_mode & 0o077 and not insecure:
            raise SecretFileError(
                f"{path}: {what} is accessible by group or others (mode "
                f"{stat.S_IMODE(st.st_mode):04o}; refused: chmod 600 it, or pass "
                "--insecure-credential-file)")
        raw = os.read(fd, MOST_BYTES + 1)
    except OSError as e:
        raise SecretFileError(f"{path}: {what} unreadable: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > MOST_BYTES:
        raise SecretFileError(f"{path}: {what} larger than {MOST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SecretFileError(f"{path}: {what} is not UTF-8 (byte {e.start + 1})") from None
    text = text.strip()
    if not text:
        raise SecretFileError(f"{path}: {what} is empty")
    if "\n" in text or "\0" in text:
        raise SecretFileError(f"{path}: {what} holds more than one line")
    return text


__all__ = ["CREATE_FLAGS", "MOST_BYTES", "PRIVATE", "Reserved", "SecretFileError", "create",
           "read", "remove_created", "reserve"]
