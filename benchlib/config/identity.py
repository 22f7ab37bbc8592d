"""How a person is shown several deployments at once: each full name (model · server · settings · host, as
suites.study.deployment_name writes it) said once, and a short label after it.

    SHORT LABEL RULE  the parts every deployment shares are said once (shared_part) and left out of each label;
                      a settings part ("demo,n_threads=1") loses the comma-separated settings all share; what is
                      left is cut to the first MIN_WORDS '-'-separated words of each part, one more word at a time
                      until every label is unique ("gemma3-270m-q4_k_m" → "gemma3-270m"). Where a name is another's
                      with a part added (a study's base deployment beside its grid point "slow"), every label
                      starts with its model ("tiny-model", "tiny-model · slow").

Files keep the full name; labels are for what a person reads in one context (the terminal after a study, the
report's first screen), always beside a key back to the full names."""

from __future__ import annotations

from typing import Sequence

SEPARATOR = " · "
MIN_WORDS = 2  # "gemma3-270m", not "gemma3": the model's size is what a reader tells two small models apart by


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
