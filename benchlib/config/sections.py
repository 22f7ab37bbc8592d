"""The base of every params section: unknown keys rejected, no inf or nan, and never a boolean taken as a number;
and the rule every URL field keeps (url_credentials: nothing in it that could be a credential)."""

from __future__ import annotations

import typing
import urllib.parse
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


def _takes_number(annotation: Any) -> bool:
    """Whether a field holds numbers (int, float, optional or in a list), and not booleans."""
    if typing.get_origin(annotation) is list:
        return _takes_number(typing.get_args(annotation)[0])
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return bool not in kinds and any(k in (int, float) for k in kinds)


class Section(BaseModel):
    # inf and nan are not numbers a user means (timeout_s: .inf would wait forever)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_as_number(cls, value: Any, info: Any) -> Any:
        """`warmups: true` is a slip, not 1: a boolean is never taken as a number (pydantic's lax mode would)."""
        field = cls.model_fields.get(info.field_name)
        if field is not None and _takes_number(field.annotation) \
                and any(isinstance(v, bool) for v in (value if isinstance(value, list) else [value])):
            raise ValueError("a boolean (true/false) is not a number: write the number")
        return value


SECRET_QUERY = ("key", "secret", "token", "password", "signature", "sig", "credential")


def url_secret(url: str) -> str:
    """What in a store URL is a secret, in words for a message; "" when nothing is. Looser than url_credentials:
    a store URL may name a user (sftp://user@host/…, the key from the SSH agent) and take options in its query,
    but never a password or a query key that names a credential."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None:
        return "a password"
    for key, _ in urllib.parse.parse_qsl(parts.query):
        if any(word in key.lower() for word in SECRET_QUERY):
            return f"'{key}' in its query"
    return ""


def url_credentials(url: str) -> str:
    """What in a URL could be a credential, in words for a message; "" when nothing could. A URL in params is written
    to manifest.json and the executed notebook, so such a URL is refused, never stored."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None:
        return "a password (user:password@)"
    if parts.username:
        return "user info (user@)"
    if parts.query or parts.fragment:
        return "a query or fragment (a key in ?…)"
    return ""
