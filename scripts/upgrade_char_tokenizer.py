"""Give model directories saved by earlier versions (a ``char_tokenizer.json``) transformers'
tokenizer files instead, so ``AutoTokenizer.from_pretrained`` loads them; the ids do not change.

    python scripts/upgrade_char_tokenizer.py src/taskextrap/llm/models/parity runs/my-model

taskextrap itself still loads the older directories as they are.
"""

from __future__ import annotations

import argparse
import sys

from taskextrap.errors import TaskextrapError
from taskextrap.llm.tokenizer import upgrade_legacy_directory


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directories", nargs="+")
    args = ap.parse_args(argv)
    for directory in args.directories:
        try:
            print(f"upgraded: {upgrade_legacy_directory(directory)}")
        except TaskextrapError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
