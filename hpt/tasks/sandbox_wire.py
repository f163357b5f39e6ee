"""What crosses between the sandboxed program and the checker that tests it: plain data only,
as one line of JSON per message, in a tagged form this module decodes itself.

A value is ``[tag, ...]``: ``["none"]``, ``["bool", true]``, ``["int", "123"]``,
``["float", "nan"]`` (its ``repr``), ``["complex", re, im]``, ``["str", s]``, ``["bytes", hex]``,
``["bytearray", hex]``, ``["range", start, stop, step]``, ``["list"|"tuple"|"set"|"frozenset"|
"iter", [items]]``, ``["dict", [[key, value], ...]]``; anything else is ``["other", typename]``,
which decodes to a ``TypeError``. Types are told by identity (``type(x) is int``), never by
``in``, ``==`` or ``isinstance``, so a subclass or a metaclass that claims to be ``int`` is
"other". Nothing is pickled or marshalled; ``decode`` builds only the types above, so whatever
the program sends, the checker gets plain data or an exception.

Both sides load this file: the checker as a trusted module, the program's harness before the
program exists (there it is a convenience, not a defence: the program may rewrite anything in
its own process, and the checker trusts nothing it sends).
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEPTH = 100  # how deeply nested a value may be
MESSAGE_CAP = 32 * 1024 * 1024  # bytes of one message
TEXT_CAP = 4_000  # characters of an exception's message or a type's name kept
_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class WireError(ValueError):
    """A message that is not in the format (or too big, or too deep)."""


def _tagged(value: Any, depth: int, others: bool) -> list[Any]:
    kind = type(value)
    if kind is type(None):
        return ["none"]
    if kind is bool:
        return ["bool", value]
    if kind is int:
        return ["int", str(value)]
    if kind is float:
        return ["float", repr(value)]
    if kind is str:
        return ["str", value]
    if kind is complex:
        return ["complex", repr(value.real), repr(value.imag)]
    if kind is bytes or kind is bytearray:
        return [kind.__name__, value.hex()]
    if kind is range:
        return ["range", str(value.start), str(value.stop), str(value.step)]
    if depth >= DEPTH:
        raise WireError(f"a value nested deeper than {DEPTH}")
    depth += 1
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return [kind.__name__, [_tagged(item, depth, others) for item in value]]
    if kind is dict:
        pairs = [[_tagged(k, depth, others), _tagged(v, depth, others)] for k, v in value.items()]
        return ["dict", pairs]
    if hasattr(kind, "__next__"):  # an iterator or generator: its items, to the end
        return ["iter", [_tagged(item, depth, others) for item in value]]
    name = str(getattr(kind, "__name__", "object"))[:TEXT_CAP]
    if not others:
        raise WireError(f"a {name} is not plain data")
    return ["other", name]


def encode(value: Any, others: bool = True) -> bytes:
    """One message (a line) carrying ``value``; ``WireError`` when it is too deep or big, or
    (``others=False``) holds what is not plain data."""
    line = json.dumps(_tagged(value, 0, others), ensure_ascii=True, separators=(",", ":")).encode()
    if len(line) >= MESSAGE_CAP:
        raise WireError(f"a value of more than {MESSAGE_CAP} bytes")
    return line + b"\n"


def message(data: Any) -> bytes:
    """A control message (a dict of JSON's own types) as one line."""
    return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def parse(line: bytes) -> Any:
    """A line as JSON, or ``WireError``."""
    if len(line) >= MESSAGE_CAP:
        raise WireError(f"a message of more than {MESSAGE_CAP} bytes")
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a message that is not JSON ({type(exc).__name__})") from None


def _text(value: Any) -> str:
    if type(value) is not str:
        raise WireError("a malformed value")
    return value


def _int(value: Any) -> int:
    text = _text(value)
    digits = text[1:] if text[:1] == "-" else text
    if not (digits.isascii() and digits.isdigit()):
        raise WireError("a malformed int")
    try:
        return int(text)
    except ValueError:  # more digits than int() converts
        raise WireError("an int too long to convert") from None


def _float(value: Any) -> float:
    text = _text(value)
    if len(text) > 40:
        raise WireError("a malformed float")
    try:
        return float(text)
    except ValueError:
        raise WireError("a malformed float") from None


def _items(value: Any) -> list[Any]:
    if type(value) is not list:
        raise WireError("a malformed value")
    return value


def decode(tree: Any, depth: int = 0) -> Any:
    """The value a parsed message carries: only plain data of the types above. ``TypeError``
    for an "other", ``WireError`` for anything not in the format."""
    node = _items(tree)
    if not node or type(node[0]) is not str:
        raise WireError("a malformed value")
    tag, args = node[0], node[1:]
    if depth > DEPTH:
        raise WireError(f"a value nested deeper than {DEPTH}")
    if tag == "none" and not args:
        return None
    if len(args) == 1:
        (arg,) = args
        if tag == "bool" and type(arg) is bool:
            return arg
        if tag == "int":
            return _int(arg)
        if tag == "float":
            return _float(arg)
        if tag == "str":
            return _text(arg)
        if tag in ("bytes", "bytearray"):
            try:
                data = bytes.fromhex(_text(arg))
            except ValueError:
                raise WireError("malformed bytes") from None
            return data if tag == "bytes" else bytearray(data)
        if tag in _SEQUENCES or tag == "iter":
            items = [decode(item, depth + 1) for item in _items(arg)]
            if tag == "iter":
                return iter(items)
            try:
                return _SEQUENCES[tag](items)
            except TypeError:  # a set of lists
                raise WireError(f"a {tag} of unhashable items") from None
        if tag == "dict":
            pairs = []
            for pair in _items(arg):
                if len(_items(pair)) != 2:
                    raise WireError("a malformed dict")
                pairs.append((decode(pair[0], depth + 1), decode(pair[1], depth + 1)))
            try:
                return dict(pairs)
            except TypeError:
                raise WireError("a dict with unhashable keys") from None
        if tag == "other":
            raise TypeError(f"the candidate returned a {_text(arg)[:100]} object, not plain data")
    if tag == "complex" and len(args) == 2:
        return complex(_float(args[0]), _float(args[1]))
    if tag == "range" and len(args) == 3:
        try:
            return range(_int(args[0]), _int(args[1]), _int(args[2]))
        except ValueError:  # step 0
            raise WireError("a malformed range") from None
    raise WireError(f"an unknown or malformed value ({str(tag)[:40]!r})")


def describe(exc: BaseException | None, before: str) -> str:
    """Why a program or a check failed, in one line; ``before`` says when ("during check()")."""
    if exc is None:
        return f"the harness could not tell how the program ended {before}"
    if isinstance(exc, MemoryError):
        return "MemoryError"  # no formatting: there may be no memory left for it
    if isinstance(exc, SystemExit):
        return f"exited {before} (SystemExit {exit_status(exc.code)})"
    if type(exc).__name__ == "Exited" and hasattr(exc, "status"):  # sandbox_child's os._exit
        return f"os._exit called {before} (status {exit_status(exc.status)})"
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
    return f"{name}: {text[-1][:TEXT_CAP]}" if text else name


def exit_status(code: object) -> str:
    """A SystemExit's code as the interpreter would read it: None is 0, False is 0."""
    if code is None:
        return "0"
    if isinstance(code, bool):
        return str(int(code))
    return repr(code) if not isinstance(code, int) else str(code)
