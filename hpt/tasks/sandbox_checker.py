"""The trusted side of a check, run as
``python -I -S -B sandbox_checker.py CPU_S MEMORY_BYTES PROOF_FD REQUEST_FD REPLY_FD``
with, on stdin, a fresh random token on the first line and then a JSON object:
``{"entry_point": name or null, "context": the prompt, "tests": the test code}``.

This process never runs generated code. It builds a fresh namespace from the dataset's own
text — the prompt (its imports and helpers, e.g. HumanEval/32's ``poly``) and then the test —
in which the entry point is a proxy: a call encodes its arguments (``sandbox_wire``), sends
them down REQUEST_FD to the sandboxed program, which calls its own function and answers on
REPLY_FD; the proxy decodes the answer into plain data or raises (what the candidate raised,
by builtin name, or a TypeError for a value that is not plain data). Then it calls
``check(proxy)``, and only when that returns does it write the token to PROOF_FD and exit 0.
Nothing the program does reaches this process but the bytes of its replies: shadowed builtins,
a redefined ``check``, always-equal objects, frames and type-dict tricks all stay in the
program's own interpreter.

Without an entry point (a whole program), the program's own word that it ran to its end is
what passes: there is nothing of the dataset's to run.
"""

from __future__ import annotations

import builtins
import json
import os
import resource
import sys
import types

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from hpt.tasks import sandbox_wire as wire
else:  # run as a script (-I: its directory is not on sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sandbox_wire as wire
if TYPE_CHECKING:
    from typing import Any

CHECK_MODULE = "__hpt_check__"
NO_WORD = "the program ended without a word"  # the parent then says why, from its exit


class ProgramEnded(Exception):
    """The program stopped answering; its message is the reason, as the program's harness
    gave it, or what is known."""


class CandidateError(Exception):
    """What the candidate raised, when it is not a builtin exception: ``module.Name: text``."""


class Channel:
    """Requests to the program and its replies, one JSON line each."""

    def __init__(self, request_fd: int, reply_fd: int) -> None:
        self.request_fd, self.reply_fd, self.pending = request_fd, reply_fd, bytearray()

    def send(self, line: bytes) -> None:
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self.request_fd, view) :]
        except OSError:  # it closed its end: the reply (none) says why
            pass

    def receive(self) -> Any:
        searched = 0  # the buffer before this holds no newline (a long line: no quadratic scan)
        while (end := self.pending.find(b"\n", searched)) < 0:
            searched = len(self.pending)
            if searched >= wire.MESSAGE_CAP:
                raise ProgramEnded(f"the program sent more than {wire.MESSAGE_CAP} bytes")
            chunk = os.read(self.reply_fd, 1 << 16)
            if not chunk:
                raise ProgramEnded(NO_WORD)
            self.pending += chunk
        line = bytes(self.pending[:end])
        del self.pending[: end + 1]
        try:
            reply = wire.parse(line)
        except wire.WireError as exc:
            raise ProgramEnded(f"the program sent something unreadable ({exc})") from None
        if type(reply) is not dict:
            raise ProgramEnded("the program sent something unreadable (not an object)")
        return reply


def _ended(reply: dict[str, Any]) -> ProgramEnded:
    why = reply.get("ended")
    return ProgramEnded(why[: wire.TEXT_CAP] if type(why) is str else "the program ended")


def _raised(name: Any, text: Any) -> Exception:
    """What the candidate raised, as an exception of the checker's own: a builtin one by
    name (a test may expect ValueError), else CandidateError. Never StopIteration: raised
    inside ``for x in map(candidate, ...)`` it would end the test's loop as if all were
    checked."""
    name = name[:200] if type(name) is str else "Exception"
    text = text[: wire.TEXT_CAP] if type(text) is str else ""
    kind = vars(builtins).get(name)
    if (
        isinstance(kind, type)
        and issubclass(kind, Exception)
        and not issubclass(kind, (StopIteration, StopAsyncIteration))
    ):
        try:
            return kind(text) if text else kind()
        except Exception:  # one that wants other arguments (ExceptionGroup, UnicodeError…)
            pass
    return CandidateError(f"{name}: {text}" if text else name)


def proxy(channel: Channel, entry_point: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            request = wire.encode([list(args), kwargs], others=False)
        except wire.WireError as exc:
            raise TypeError(f"the test's arguments cannot be sent: {exc}") from None
        channel.send(request)
        reply = channel.receive()
        if "value" in reply:
            try:
                return wire.decode(reply["value"])
            except wire.WireError as exc:
                raise ProgramEnded(f"the program sent something unreadable ({exc})") from None
        if "raised" in reply:
            raise _raised(reply["raised"], reply.get("message"))
        raise _ended(reply)

    call.__name__ = call.__qualname__ = entry_point
    return call


def _limit(cpu_s: int, memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # it writes no file
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _read_stdin() -> tuple[bytes, dict[str, Any]]:
    data = sys.stdin.buffer.read()
    token, _, config = data.partition(b"\n")
    return token.strip(), json.loads(config)


def run(channel: Channel, entry_point: str | None, context: str, tests: str) -> None:
    """Returns only when the check passed; raises why not."""
    hello = channel.receive()
    if hello.get("ready") is not True:
        raise _ended(hello)
    if entry_point is None:  # a whole program: it ran to its end
        return
    module = types.ModuleType(CHECK_MODULE)
    sys.modules[CHECK_MODULE] = module  # dataclasses and typing look modules up
    namespace = module.__dict__
    exec(compile(context, "prompt.py", "exec", dont_inherit=True), namespace)
    namespace[entry_point] = candidate = proxy(channel, entry_point)
    exec(compile(tests, "test.py", "exec", dont_inherit=True), namespace)
    check = namespace.get("check")
    if not callable(check):
        raise ProgramEnded("check() is not defined by the tests")
    check(candidate)


def main() -> None:
    token, config = _read_stdin()
    cpu_s, memory_bytes, proof_fd, request_fd, reply_fd = (int(a) for a in sys.argv[1:6])
    _limit(cpu_s, memory_bytes)
    entry_point = config["entry_point"]
    try:
        run(Channel(request_fd, reply_fd), entry_point, config["context"], config["tests"])
    except BaseException as exc:
        if isinstance(exc, (ProgramEnded, CandidateError)):
            why = str(exc)
        else:
            why = wire.describe(exc, "during check()" if entry_point else "")
        os.write(proof_fd, why.encode("utf-8", "replace"))
        os._exit(1)
    os.write(proof_fd, token)
    os._exit(0)


if __name__ == "__main__":
    main()
