"""Write a deterministic order stream as JSON-lines files, for the quickstart and the tests.

Order ``i`` happens at ``2024-01-01 00:00:00 + i * step`` in region ``REGIONS[i*7 % 3]`` for an
amount of ``((i * 37) % 1000 + 1) / 10``. Files are written atomically (temp file, then rename), as
pitstop's File source expects.

    python examples/make_orders.py DIR --first 0 --last 2000 --files 4 [--step-seconds 90]
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

REGIONS = ("eu", "us", "apac")
EPOCH = datetime(2024, 1, 1)


def order(i: int, step_seconds: int = 90) -> dict[str, object]:
    return {
        "order_id": i,
        "region": REGIONS[(i * 7) % 3],
        "amount": ((i * 37) % 1000 + 1) / 10,
        "ts": (EPOCH + timedelta(seconds=i * step_seconds)).isoformat(sep=" "),
    }


def write_orders(
    folder: Path, first: int, last: int, files: int, step_seconds: int = 90, prefix: str = "orders"
) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    ids = list(range(first, last))
    per_file = max(1, -(-len(ids) // files))
    written = []
    for lo in range(0, len(ids), per_file):
        chunk = ids[lo : lo + per_file]
        name = f"{prefix}-{chunk[0]:07d}.json"
        tmp = folder / f".{name}.tmp"
        tmp.write_text("".join(json.dumps(order(i, step_seconds)) + "\n" for i in chunk))
        os.replace(tmp, folder / name)
        written.append(folder / name)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--last", type=int, default=2000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--step-seconds", type=int, default=90)
    args = parser.parse_args()
    paths = write_orders(args.folder, args.first, args.last, args.files, args.step_seconds)
    print(f"wrote orders {args.first}..{args.last - 1} into {len(paths)} file(s) in {args.folder}")


if __name__ == "__main__":
    main()
