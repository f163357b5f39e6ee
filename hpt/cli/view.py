"""``hpt view``: a self-contained HTML trace viewer of run directories."""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path
from typing import Any

from rich.console import Console

from hpt.cli.common import port
from hpt.results.reader import require_run_dirs
from hpt.results.rundir import RunDirError


def add_parser(sub: Any) -> None:
    view = sub.add_parser(
        "view", help="a self-contained HTML trace viewer of run directories (works offline)"
    )
    view.add_argument("run_dirs", nargs="+", type=Path, metavar="DIR")
    view.add_argument("--out", type=Path, help="HTML file (default DIR/view.html)")
    view.add_argument(
        "--serve", action="store_true", help="serve it on localhost instead of opening the file"
    )
    view.add_argument("--port", type=port, default=0, help="with --serve (default: any free port)")
    view.add_argument("--no-open", action="store_true", help="write the file, open nothing")


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.viewer import page

    require_run_dirs(*args.run_dirs)
    out = args.out or args.run_dirs[0] / "view.html"
    try:
        n = page.write_view(args.run_dirs, out)
    except OSError as exc:
        raise RunDirError(f"cannot write {out}: {exc.strerror}") from None
    console.print(
        f"wrote {out} ({n} samples, {out.stat().st_size / 1e6:.1f} MB)",
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    if args.serve:
        try:
            page.serve(out, args.port)
        except OSError as exc:
            raise RunDirError(f"cannot serve on port {args.port}: {exc.strerror}") from None
        except KeyboardInterrupt:
            return 0
    elif not args.no_open and not webbrowser.open(out.resolve().as_uri()):
        console.print("no browser to open it here; open the file in one", highlight=False)
    return 0
