"""A deployment's one identity, and how a person is shown several at once.

    DEPLOYMENT   host, model, server, settings (server.variant: a study's grid point). Its name, model · server ·
                 settings · host with the parts not known left out, is how every view prints it and the one key
                 every layer joins on (analysis, paper, views, compare, the study, interchange): rows that carry a
                 `system` column are keyed by it, rows with only model and host by Deployment(model, host=host).
                 The published reference numbers know a deployment only by model and host and name it
                 'model @ host' (Deployment.published), the form the paper prints them in.

    SHORT LABEL RULE  the parts every deployment shares are said once (shared_part) and left out of each label;
                      a settings part ("demo,n_threads=1") loses the comma-separated settings all share; what is
                      left is cut to the first MIN_WORDS '-'-separated words of each part, one more word at a time
                      until every label is unique ("gemma3-270m-q4_k_m" → "gemma3-270m"). Where a name is another's
                      with a part added (a study's base deployment beside its grid point "slow"), every label
                      starts with its model ("tiny-model", "tiny-model · slow").

Files keep the full name; labels are for what a person reads in one context (the terminal after a study, the
report's first screen), always beside a key back to the full names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from benchlib.config.params import BenchParams

SEPARATOR = " · "
PUBLISHED_SEPARATOR = " @ "
MIN_WORDS = 2  # "gemma3-270m", not "gemma3": the model's size is what a reader tells two small models apart by


@dataclass(frozen=True)
class Deployment:
    """One deployment (DEPLOYMENT): what ran, where, served how."""

    model: str
    server: str = ""
    settings: str = ""
    host: str = ""

    @property
    def name(self) -> str:
        """model · server · settings · host, the parts not known left out."""
        return SEPARATOR.join(str(p) for p in (self.model, self.server, self.settings, self.host) if p)

    @property
    def key(self) -> str:
        """What every layer joins this deployment's rows on: its name, so no layer translates."""
        return self.name

    @classmethod
    def from_params(cls, params: BenchParams) -> Deployment:
        server = params.server
        return cls(server.model, server.software or server.kind, server.variant, params.host.name)

    @classmethod
    def from_recorded(cls, params: Mapping[str, Any], host: str = "", model: str = "") -> Deployment:
        """From the params a manifest records (plain sections); `host` and `model` (the folder names) stand in for
        what they lack."""
        server, host_p = params.get("server") or {}, params.get("host") or {}
        return cls(str(server.get("model") or model), str(server.get("software") or server.get("kind") or ""),
                   str(server.get("variant") or ""), str(host_p.get("name") or host))

    @staticmethod
    def published(model: str, host: str) -> str:
        """The key of a deployment the published reference numbers know only by model and host."""
        return f"{model}{PUBLISHED_SEPARATOR}{host}"

    @staticmethod
    def model_of(key: str) -> str:
        """The model a key names, in either form."""
        key = str(key)
        if PUBLISHED_SEPARATOR in key:
            return key.split(PUBLISHED_SEPARATOR)[0]
        return (parts(key) or [key])[0]


def keys(rows: pd.DataFrame) -> pd.Series:
    """Each row's deployment key: its `system` column where the rows carry one, else Deployment(model, host=host)."""
    if "system" in rows:
        return rows["system"].astype(str)
    models = rows["model"] if "model" in rows else pd.Series("", index=rows.index)
    hosts = rows["host"] if "host" in rows else pd.Series("", index=rows.index)
    return pd.Series([Deployment(str(m), host=str(h)).key for m, h in zip(models, hosts)], index=rows.index,
                     dtype=object)


def parts(name: str) -> list[str]:
    return [p for p in str(name).split(SEPARATOR) if p]


def shared_part(names: Sequence[str]) -> str:
    """The parts every name has ('llama-cpp-python · demo · local-cpu'); '' for fewer than two names."""
    if len(set(names)) < 2:
        return ""
    common = set(parts(names[0])).intersection(*(parts(n) for n in names[1:]))
    return SEPARATOR.join(p for p in parts(names[0]) if p in common)


def _own_settings(part: str, shared: set[str]) -> str:
    items = part.split(",")
    return ",".join(i for i in items if i not in shared) if len(items) > 1 else part


def _cut(part: str, words: int) -> str:
    return "-".join(part.split("-")[:words])


def short_labels(names: Sequence[str]) -> dict[str, str]:
    """Each name → its short label, unique among `names` (SHORT LABEL RULE). One name alone is labelled by its
    first part (the model)."""
    unique = list(dict.fromkeys(str(n) for n in names))
    if not unique:
        return {}
    if len(unique) == 1:
        return {unique[0]: _cut(parts(unique[0])[0], MIN_WORDS) if parts(unique[0]) else unique[0]}
    common = set(shared_part(unique).split(SEPARATOR)) - {""}
    settings = [set(p.split(",")) for n in unique for p in parts(n) if "," in p]
    shared_settings = set.intersection(*settings) if len(settings) == len(unique) else set()
    own = {n: [_own_settings(p, shared_settings) for p in parts(n) if p not in common] for n in unique}
    if any(not left for left in own.values()):  # one name is another's with a part added: both keep the model
        own = {n: [parts(n)[0], *(p for p in left if p != parts(n)[0])] for n, left in own.items()}
    longest = max(len(p.split("-")) for left in own.values() for p in left)
    for words in range(MIN_WORDS, longest + 1):
        labels = {n: SEPARATOR.join(_cut(p, words) for p in left) for n, left in own.items()}
        if len(set(labels.values())) == len(labels):
            return labels
    labels = {n: SEPARATOR.join(left) for n, left in own.items()}
    return labels if len(set(labels.values())) == len(labels) else {n: n for n in unique}


def key_lines(labels: dict[str, str], width: int = 0) -> list[str]:
    """'<label>  = <full name>' per deployment, the labels padded to one column (to `width` at least)."""
    pad = max([width, *(len(label) for label in labels.values())])
    return [f"{label:<{pad}}  = {name}" for name, label in labels.items()]
