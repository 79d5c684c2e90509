"""``python -m offload.testing DELEGATE [--options JSON] [--json]``: run the conformance kit."""

from __future__ import annotations

import argparse
import json
import sys

from offload._plugins import load_delegate
from offload.errors import OffloadError
from offload.testing._runner import results_as_dicts, run_conformance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offload.testing", description=__doc__)
    parser.add_argument("delegate", help="installed delegate name, or path/to/delegate.py")
    parser.add_argument("--options", default="{}", help="delegate options as a JSON object")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        delegate = load_delegate(args.delegate, json.loads(args.options))
    except OffloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results = run_conformance(delegate)
    if args.json:
        print(json.dumps(results_as_dicts(results), indent=2))
    else:
        for r in results:
            print(f"{r.status:12} {r.case:28} {r.op:18} {r.dtype:8} {r.detail}")
        counts = {
            s: sum(r.status == s for r in results)
            for s in ("pass", "fail", "error", "not-claimed", "excluded")
        }
        print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return 1 if any(r.status in ("fail", "error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
