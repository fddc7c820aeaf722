"""python -m ngraph.settings: the settings and their values in this environment, or with
--markdown the reference table (docs/settings.md)."""

from __future__ import annotations

import argparse
import sys

from ngraph.settings import get, markdown, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ngraph.settings",
                                     description="ngraph's settings (NGRAPH_* variables).")
    parser.add_argument("--markdown", nargs="?", const="-", metavar="PATH",
                        help="write the reference table as Markdown to PATH (default: stdout)")
    args = parser.parse_args(argv)
    if args.markdown is None:
        for s in table():
            print(f"{s['name']}={get(s['name'])!r}")
        return 0
    text = markdown()
    if args.markdown == "-":
        sys.stdout.write(text)
    else:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
