"""Typed reads from the JSON objects of server answers."""

from __future__ import annotations

from typing import cast

from client.api import ApiError


class Fields:
    """Typed reads from a JSON object of a response; a wrong shape is ``invalid_response``."""

    def __init__(self, raw: object, where: str = "response") -> None:
        if not isinstance(raw, dict):
            raise ApiError(200, "invalid_response", f"{where} is not a JSON object")
        self._raw = cast(dict[str, object], raw)
        self._where = where

    def value(self, key: str) -> object:
        return self._raw.get(key)

    def mapping(self, key: str) -> dict[str, object]:
        value = self._raw.get(key)
        if not isinstance(value, dict):
            raise self._bad(key, "an object")
        return cast(dict[str, object], value)

    def text(self, key: str, *, allow_empty: bool = False) -> str:
        value = self._raw.get(key)
        if not isinstance(value, str) or (not value and not allow_empty):
            raise self._bad(key, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self._raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._bad(key, "a string or null")
        return value

    def integer(self, key: str) -> int:
        value = self._raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._bad(key, "an integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        if self._raw.get(key) is None:
            return None
        return self.integer(key)

    def _bad(self, key: str, kind: str) -> ApiError:
        return ApiError(200, "invalid_response", f"{self._where}.{key} is not {kind}")
