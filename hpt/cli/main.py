"""The ``hpt`` command line: one module per subcommand; this one parses, loads plugins,
dispatches and turns a user's mistake into one clear line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from hpt import __version__
from hpt.backends import PROVIDERS, load_dotenv_file, redact, spec_help
from hpt.backends.secrets import redact_urls
from hpt.cli import (
    agreement,
    annotate,
    cache,
    ceiling,
    compare,
    decompose,
    export,
    judge,
    merge,
    report,
    run,
    signals,
    summarize,
    view,
)
from hpt.cli.common import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, names
from hpt.errors import HptError, validation_message
from hpt.graphs import DEFAULT_LADDER, STRATEGIES, mermaid
from hpt.plugins import installed_plugins, load_plugins
from hpt.tasks import TASKS

# Set: an unexpected exception shows its traceback (for developers) instead of one line.
DEBUG_ENV = "HPT_DEBUG"

# The subcommands whose module's command(args, console) does all the work.
COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "judge-strategies": judge.command,
    "report": report.command,
    "compare": compare.command,
    "view": view.command,
    "summarize": summarize.command,
    "cache": cache.command,
    "agreement": agreement.command,
    "decompose": decompose.command,
    "ceiling": ceiling.command,
    "annotate": annotate.command,
    "merge": merge.command,
    "export": export.command,
}


def _plugin_option(p: argparse.ArgumentParser, dest: str, default: Any) -> None:
    p.add_argument(
        "--plugin",
        action="append",
        dest=dest,
        default=default,
        metavar="MODULE",
        help="import MODULE first (it may register strategies, datasets, providers); "
        "repeatable. Installed packages' 'hpt.plugins' entry points load too",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpt", description="Evaluate language models with HPT.")
    p.add_argument("--version", action="version", version=f"hpt {__version__}")
    _plugin_option(p, "plugins_first", [])
    sub = p.add_subparsers(dest="command", required=True)
    run.add_parser(sub)
    merge.add_parser(sub)
    graph = sub.add_parser("graph", help="print the ladder's Mermaid diagram")
    graph.add_argument("--strategies", type=names, default=list(DEFAULT_LADDER))
    graph.add_argument("--mode", choices=["standard", "adaptive"], default="standard")
    judge.add_parser(sub)
    report.add_parser(sub)
    compare.add_parser(sub)
    view.add_parser(sub)
    summarize.add_parser(sub)
    agreement.add_parser(sub)
    decompose.add_parser(sub)
    ceiling.add_parser(sub)
    annotate.add_parser(sub)
    export.add_parser(sub)
    sub.add_parser("list", help="list datasets, strategies, model providers and plugins")
    cache.add_parser(sub)
    for command in sub.choices.values():  # "hpt run --plugin X" as well as "hpt --plugin X run"
        _plugin_option(command, "plugin", [])
    return p


def _list(console: Console) -> int:
    # Names a plugin chose, shown as written (never markup).
    datasets = []
    for name, task in TASKS.items():  # name(its --task-arg fields) (where it comes from)
        fields = list(task.Args.model_fields)
        datasets.append(f"{name}({', '.join(fields)})" if fields else name)
        datasets[-1] += f" ({task.hub_id})"
    console.print("datasets:   " + ", ".join(datasets), markup=False)
    shown = []
    for name, spec in STRATEGIES.items():  # name(its parameters) [what it needs]
        fields = list(spec.params.model_fields)
        needs = spec.needs.names()
        shown.append(name + (f"({', '.join(fields)})" if fields else "")
                     + (f" [uses {', '.join(needs)}]" if needs else ""))  # fmt: skip
    console.print("strategies: " + ", ".join(shown), markup=False)
    console.print("providers:  " + ", ".join(PROVIDERS), markup=False)
    console.print("models:     " + spec_help(), markup=False)
    plugins = [f"{ep.name} ({ep.value})" for ep in installed_plugins()]
    console.print("plugins:    " + (", ".join(plugins) or "none installed"), markup=False)
    return 0


def _dispatch(args: argparse.Namespace, console: Console, err: Console) -> int:
    plugins = [*args.plugins_first, *args.plugin]
    load_plugins(plugins)
    if args.command == "run":
        return run.command(args, console, err, plugins)
    if args.command == "graph":
        print(mermaid(args.strategies, adaptive=args.mode == "adaptive"))
        return 0
    if args.command in COMMANDS:
        return COMMANDS[args.command](args, console)
    return _list(console)


def say_error(err: Console, text: str) -> None:
    """``hpt: error: TEXT`` on one line: TEXT as written (never markup, never emoji), with
    known secrets and credentials in URLs taken out."""
    text = " ".join(redact_urls(redact(text)).split())
    err.print(Text.assemble(("hpt: error:", "red"), " ", text), highlight=False, soft_wrap=True)


def _unexpected(err: Console, exc: Exception) -> int:
    """An exception no reader turned into a user's error: a bug in hpt. One line names it
    and the file its traceback went to; with HPT_DEBUG set the traceback is shown instead."""
    if os.environ.get(DEBUG_ENV):
        raise exc
    where = "(not saved: the temporary directory is not writable)"
    try:
        fd, path = tempfile.mkstemp(prefix="hpt-error-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(redact_urls(redact(traceback.format_exc())))
        where = f"in {path}"
    except OSError:
        pass
    say_error(
        err,
        f"unexpected {type(exc).__name__}: {exc} -- a bug in hpt; please report it with the "
        f"traceback {where} (or run again with {DEBUG_ENV}=1 to see it)",
    )
    return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # No emoji codes anywhere: a model named ":smile:" prints as written.
    console = Console(emoji=False)
    err = Console(stderr=True, emoji=False)
    load_dotenv_file()
    # DSPy draws tqdm bars for its optimisers on both streams; hpt reports their progress and
    # failures itself, and the bars would bury a one-line error.
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        return _dispatch(args, console, err)
    except HptError as exc:  # the input's fault, or (a storage fault) the machine's
        say_error(err, str(exc))
        return exc.exit_status
    except ValidationError as exc:
        say_error(err, validation_message(exc))
    # The net under readers that do not name their file yet: still one line.
    except UnicodeDecodeError as exc:
        say_error(
            err,
            f"a file this command reads is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "check the files given to it",
        )
    except json.JSONDecodeError as exc:
        say_error(
            err,
            f"a file this command reads is not valid JSON ({exc.msg}, line {exc.lineno} column "
            f"{exc.colno}); check the files given to it",
        )
    except OSError as exc:  # the machine's refusal (permissions, a full disk), not the input's
        say_error(err, f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        err.print("hpt: interrupted; finished samples are kept in the run directory")
        return EXIT_INTERRUPTED
    except signals.Terminated:
        err.print("hpt: stopped by SIGTERM; finished work is kept", markup=False)
        return signals.EXIT_TERMINATED
    except Exception as exc:
        return _unexpected(err, exc)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
