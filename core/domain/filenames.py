"""Document filenames: what may land in the phone's Downloads folder. Pure; the server applies it
before encrypting and the phone applies it again before writing."""

from __future__ import annotations

import unicodedata

RAW_MAX_CHARS = 4096
SANITIZED_MAX_CHARS = 120
ALLOWED_EXTENSIONS = frozenset(
    [
        ".txt",
        ".md",
        ".markdown",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".log",
        ".sql",
        ".py",
        ".js",
        ".ts",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".c",
        ".h",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".sh",
        ".swift",
        ".diff",
        ".patch",
        ".tex",
        ".rst",
        ".srt",
        ".vtt",
    ]
)
NEVER = frozenset({".html", ".htm", ".svg", ".xhtml"})


class UnsafeFilenameError(ValueError):
    pass


def sanitize_filename(raw: str) -> str:
    """Strip path separators, control characters and leading dots; check length and extension.

    Raises ``UnsafeFilenameError`` for anything that cannot be made safe.
    """
    name = plain_name(raw)
    stem, dot, extension = name.rpartition(".")
    suffix = f".{extension.lower()}" if dot else ""
    if not stem or suffix in NEVER or suffix not in ALLOWED_EXTENSIONS:
        raise UnsafeFilenameError("the extension is not one of the allowed plain-text and code types")
    return name


def plain_name(raw: str) -> str:
    """A name that is safe as one entry of a folder, of any type (files sent between one's own
    devices): path separators, control characters and leading dots stripped, length checked."""
    if not isinstance(raw, str) or len(raw) > RAW_MAX_CHARS:
        raise UnsafeFilenameError(f"a filename is at most {RAW_MAX_CHARS} characters")
    name = "".join(ch for ch in raw if ch not in "/\\" and unicodedata.category(ch)[0] != "C").strip()
    while name.startswith("."):  # ". .x.txt" would leave ".x.txt" after one pass
        name = name.lstrip(".").strip()
    if not name:
        raise UnsafeFilenameError("nothing is left of the filename once made safe")
    if len(name) > SANITIZED_MAX_CHARS:
        raise UnsafeFilenameError(f"a filename is at most {SANITIZED_MAX_CHARS} characters once made safe")
    return name
