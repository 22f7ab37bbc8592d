"""Writes synthetic_mooncake.jsonl: 40 requests in Mooncake's trace format (benchlib.measure.traffic.traces) with the
structure of the FAST'25 release at a small size — three shared system prompts, conversations whose next request
extends the previous one's hash ids (a growing shared prefix), one-off requests, bursts sharing a timestamp —
over about 20 s. Seeded: running it again writes the same file. `python testdata/traces/make_synthetic.py`."""

from __future__ import annotations

import json
import random
from pathlib import Path

BLOCK = 512
OUT = Path(__file__).with_name("synthetic_mooncake.jsonl")


def main() -> None:
    rng = random.Random(33)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [fresh(2), fresh(3), fresh(1)]  # three system prompts of 2, 3 and 1 blocks
    chats: dict[int, list[int]] = {}  # conversation -> the hash ids its last request sent
    lines, stamp = [], 0
    for index in range(40):
        if index and rng.random() > 0.15:  # some arrive together, as in the release
            stamp += int(rng.expovariate(1 / 500))
        kind = rng.random()
        if kind < 0.45:  # a conversation's next turn: the whole history, then new blocks
            chat = rng.randrange(4)
            ids = chats.get(chat) or list(systems[chat % 3])
            ids = ids + fresh(rng.randint(1, 2))
            chats[chat] = ids
        elif kind < 0.85:  # a system prompt and a fresh question
            ids = list(systems[rng.randrange(3)]) + fresh(rng.randint(1, 2))
        else:  # nothing shared
            ids = fresh(rng.randint(1, 3))
        length = len(ids) * BLOCK - rng.randint(1, BLOCK - 1)  # the last block is partial
        lines.append({"timestamp": stamp, "input_length": length, "output_length": rng.randint(16, 320),
                      "hash_ids": ids})
    OUT.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


if __name__ == "__main__":
    main()
