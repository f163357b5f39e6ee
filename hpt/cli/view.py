"""``hpt view``: a self-contained HTML trace viewer of run directories, or (``--serve``) the
same viewer served live on loopback, following a run as its records land."""

from __future__ import annotations

import argparse
import asyncio
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hpt.cli.common import port
from hpt.results.reader import require_run_dirs
from hpt.results.rundir import RunDirError

if TYPE_CHECKING:
    from hpt.viewer.index import CostMeter


def add_parser(sub: Any) -> None:
    view = sub.add_parser(
        "view",
        help="a self-contained HTML trace viewer of run directories (works offline); "
        "--serve: a live one of a running campaign",
    )
    view.add_argument("run_dirs", nargs="+", type=Path, metavar="DIR")
    view.add_argument("--out", type=Path, help="HTML file (default DIR/view.html)")
    view.add_argument(
        "--serve",
        action="store_true",
        help="serve a live viewer on 127.0.0.1 that updates as records land (a running "
        "campaign: cells filling, levels, errors, cost so far); writes no file",
    )
    view.add_argument("--port", type=port, default=0, help="with --serve (default: any free port)")
    view.add_argument("--no-open", action="store_true", help="write the file, open nothing")


def _spend(directory: Path) -> dict[str, Any] | None:
    """The run's spending ledger (spend.json) as the page shows it; None where it kept none."""
    from hpt.orchestrator.budget import load_spend

    spend = load_spend(directory)
    return None if spend is None else spend.model_dump(mode="json", exclude={"batches"})


def _cost_meter() -> CostMeter:
    """Each cell's cost meter, at the prices ``hpt report`` uses (litellm's map, run.json)."""
    from hpt.reports.spending import RunningCost
    from hpt.results.costs import PriceBook, read_run_prices

    book = PriceBook.load()
    return lambda directory: RunningCost(book, read_run_prices(directory))


def command(args: argparse.Namespace, console: Console) -> int:
    from hpt.viewer import page

    if args.serve:
        if args.out is not None:
            raise RunDirError("--serve writes no file; drop --out, or drop --serve to write one")
        return _serve(args, console)
    require_run_dirs(*args.run_dirs)
    out = args.out or args.run_dirs[0] / "view.html"
    spend = [{"directory": d.name, **s} for d in args.run_dirs if (s := _spend(d)) is not None]
    try:
        n = page.write_view(args.run_dirs, out, spend=spend, cost=_cost_meter())
    except OSError as exc:
        raise RunDirError(f"cannot write {out}: {exc.strerror}") from None
    console.print(
        f"wrote {out} ({n} samples, {out.stat().st_size / 1e6:.1f} MB)",
        highlight=False, markup=False, soft_wrap=True,
    )  # fmt: skip
    if not args.no_open and not webbrowser.open(out.resolve().as_uri()):
        console.print("no browser to open it here; open the file in one", highlight=False)
    return 0


def _serve(args: argparse.Namespace, console: Console) -> int:
    from hpt.viewer.live import LiveRun, LiveServer, serve_live

    run = LiveRun(args.run_dirs, spend=_spend, cost=_cost_meter())
    server = LiveServer(run, " + ".join(d.name for d in args.run_dirs))

    def ready(url: str) -> None:
        console.print(f"serving a live view of {', '.join(map(str, args.run_dirs))} at {url} "
                      "(Ctrl-C stops)", highlight=False, markup=False, soft_wrap=True)  # fmt: skip

    try:
        asyncio.run(serve_live(server, args.port, ready))
    except OSError as exc:
        raise RunDirError(f"cannot serve on port {args.port}: {exc.strerror}") from None
    except KeyboardInterrupt:
        return 0
    return 0
