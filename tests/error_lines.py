"""Every one-line error the program can show a person, read from the source (issue 37): the text of
each error object the program makes (a subclass of shared.errors.ElicitronError, ProtocolError
aside: its code is what reaches a person, see `wire_codes`), each line printed to stderr, and each
reason given to a `fail`/`_fail` (what `elicitron ask` prints, what `status` shows of a server that
ended), the `error` of an HTTP answer (a host, the pairing page), the Qt window's banners, and what
the web page's script puts in its status and problem lines, argparse's own usage errors as the
commands' parsers can give them, and the warnings and errors the processes log (`log_lines`: read
in main's log file, a terminal, web.stderr.log, a window's log). A message built elsewhere (a
helper's return value, a constant, `TEXT.format(...)`) is followed to its text; what the program
fills in is "…", a logged message's %-placeholders too.

A message that only passes another's on (`f"elicitron: {exc}"`, `str(exc)`, `logger.error("%s",
exc)`) has no text of its own and no row: the error it passes on has one."""

import argparse
import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("main_process", "shared", "cli_process", "gateway_process", "asker_process", "web_process",
            "renderer_process")
BANNERS = ROOT / "renderer_process" / "connection_banner.py"  # the window's one-line banners

# The start of a line that says which program speaks, not what went wrong (the page's rows leave it out).
PREFIXES = ("elicitron: config error: ", "elicitron: ", "elicitron serve: ", "elicitron web: ",
            "elicitron http gateway: ")
FILLED = "…"
_NOT_SHOWN = {
    "ProtocolError": "a peer's error: its code (shared/errors.py WireCode) is what a person sees",
    "PageMessageError": "a 400 answer to the web page's own script: a browser person never sees it",
}
# Functions that show a person what they are given (file, name -> the argument's position), called
# in that file: `elicitron ask`'s exit line, a server connection's end (in `status`), a question's
# refusal, a listen address's refusal of clear text, why a command or window lost main (or never
# reached it), the window's call panel's error line and its sign-in dialog.
_SINKS = {("asker_process/cli.py", "_fail"): -1, ("main_process/relay/upstream.py", "fail"): -1,
          ("main_process/relay/upstream_http.py", "_fail"): -1, ("shared/questions.py", "_refuse"): 0,
          ("main_process/http_gateway.py", "tls_files"): -1, ("web_process/listen.py", "tls_files"): -1,
          ("shared/peer.py", "_failed"): 0, ("shared/peer.py", "_lose"): 0, ("shared/peer.py", "_tell_lost"): 0,
          ("renderer_process/call_panel.py", "show_error"): 0, ("renderer_process/sign_in_card.py", "QMessageBox"): 2}
# Errors outside the ElicitronError tree that a person still reads: a server that would not start
# (in `status` and the window's servers panel), a key given twice (passed on as a config error).
_ALSO_SHOWN = {"UpstreamError", "_DuplicateKeyError"}
_CODE_ENUMS = {"WireCode", "RpcCode"}


@dataclass(frozen=True)
class ErrorLine:
    text: str  # as a person sees it, FILLED where the program fills something in
    where: str  # path:line of the code that makes it


def normalized(text: str) -> str:
    """One spelling of a line: no program prefix, FILLED runs collapsed, spaces collapsed."""
    text = " ".join(text.split())
    for prefix in PREFIXES:
        if f"{text} ".startswith(prefix):
            text = text[len(prefix):]
            break
    return re.sub(f"{FILLED}+", FILLED, text).strip()


def _has_own_text(text: str) -> bool:
    return bool(re.search(r"[A-Za-z]{2}", normalized(text).replace(FILLED, "")))


class _Source:
    """The packages' syntax trees, with the functions and module constants a message may come from."""

    def __init__(self) -> None:
        self.files: dict[Path, ast.Module] = {}
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                self.files[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.functions: dict[str, list[tuple[Path, ast.FunctionDef]]] = {}
        self.constants: dict[Path, dict[str, ast.expr]] = {}
        for path, tree in self.files.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    self.functions.setdefault(node.name, []).append((path, node))
            self.constants[path] = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                                    for target in node.targets if isinstance(target, ast.Name)}
        self.error_classes = self._error_classes()

    def _error_classes(self) -> set[str]:
        found = {"ElicitronError"}
        classes = [node for tree in self.files.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        while True:
            more = {node.name for node in classes
                    if any(isinstance(base, ast.Name) and base.id in found for base in node.bases)} - found
            if not more:
                return (found | _ALSO_SHOWN) - set(_NOT_SHOWN)
            found |= more


def _parameters(function: ast.FunctionDef) -> list[str]:
    return [arg.arg for arg in function.args.args if arg.arg not in ("self", "cls")]


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _is_code(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in _CODE_ENUMS


class _Renderer:
    """The texts an expression can make, FILLED for what the program fills in. `bound`: a followed
    function's parameters, as the texts of the arguments it was called with."""

    def __init__(self, source: _Source, path: Path, scope: ast.AST | None, depth: int = 0,
                 bound: dict[str, list[str]] | None = None) -> None:
        self.source, self.path, self.scope, self.depth = source, path, scope, depth
        self.bound = bound or {}

    def texts(self, node: ast.expr) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            texts = [""]
            for part in node.values:
                pieces = [str(part.value)] if isinstance(part, ast.Constant) else self._field(part)
                texts = [text + piece for text in texts for piece in pieces]
            return texts
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return [left + right for left in self.texts(node.left) for right in self.texts(node.right)]
        if isinstance(node, ast.IfExp):  # either branch can be what is shown
            return self.texts(node.body) + self.texts(node.orelse)
        if self.depth < 3 and isinstance(node, ast.Name):
            return self._name(node.id)
        if self.depth < 3 and isinstance(node, ast.Call):
            return self._call(node)
        return [FILLED]

    def _field(self, part: ast.expr) -> list[str]:
        """An f-string's field: a text the program always puts there (a string constant, or a
        followed function's argument), else FILLED."""
        if isinstance(part, ast.FormattedValue) and not part.format_spec and part.conversion == -1 \
                and isinstance(part.value, ast.Name):
            name = part.value.id
            if name in self.bound:
                return self.bound[name]
            values = self._assigned(name)
            if values and all(isinstance(value, ast.Constant) and isinstance(value.value, str) for value in values):
                return [str(value.value) for value in values if isinstance(value, ast.Constant)]
        return [FILLED]

    def _deeper(self, path: Path, scope: ast.AST | None, bound: dict[str, list[str]] | None = None) -> "_Renderer":
        return _Renderer(self.source, path, scope, self.depth + 1, bound)

    def _assigned(self, name: str) -> list[ast.expr]:
        if self.scope is not None:
            found = [node.value for node in ast.walk(self.scope) if isinstance(node, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]
            if found:
                return found
        constants = self.source.constants.get(self.path, {})
        return [constants[name]] if name in constants else []

    def _name(self, name: str) -> list[str]:
        if name in self.bound:
            return self.bound[name]
        return [text for value in self._assigned(name) for text in self._deeper(self.path, self.scope).texts(value)] \
            or [FILLED]

    def _call(self, call: ast.Call) -> list[str]:
        name = _called_name(call)
        if name == "format" and isinstance(call.func, ast.Attribute):  # TEXT.format(...): its fields are filled in
            return [re.sub(r"\{[^{}]*\}", FILLED, text) for text in self.texts(call.func.value)]
        defined = self.source.functions.get(name or "", [])
        mine = [found for found in defined if found[0] == self.path] or defined
        if len(mine) != 1:
            return [FILLED]  # a builtin (str, repr) or a name too common to follow
        path, function = mine[0]
        bound = {param: self.texts(arg) for param, arg in zip(_parameters(function), call.args, strict=False)
                 if isinstance(arg, ast.Constant | ast.JoinedStr)}  # a message given as it is
        returns = [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value]
        texts = [text for value in returns for text in self._deeper(path, function, bound).texts(value)]
        if call.args and not any(_has_own_text(text) for text in texts):  # a wrapper (for_terminal): its argument
            return self.texts(call.args[0])
        return texts or [FILLED]


def _message_argument(call: ast.Call, error_classes: set[str], where: str) -> ast.expr | None:
    """The argument of `call` (in the file `where`) that is a message shown to a person, if `call`
    makes or shows one."""
    name = _called_name(call)
    if name == "print":
        stderr = any(keyword.arg == "file" and ast.unparse(keyword.value) == "sys.stderr" for keyword in call.keywords)
        return call.args[0] if stderr and call.args else None
    position = _SINKS.get((where, name or ""))
    if position is not None:
        return call.args[position] if -len(call.args) <= position < len(call.args) else None
    if name == "JSONResponse" and call.args and isinstance(call.args[0], ast.Dict):  # the web page shows "error"
        body = call.args[0]
        return next((value for key, value in zip(body.keys, body.values, strict=True)
                     if isinstance(key, ast.Constant) and key.value == "error"), None)
    if name in error_classes and isinstance(call.func, ast.Name):
        return next((arg for arg in call.args if not _is_code(arg)), None)
    return None


def _enclosing_functions(tree: ast.Module) -> Iterator[tuple[ast.Call, ast.AST | None]]:
    def walk(node: ast.AST, scope: ast.AST | None) -> Iterator[tuple[ast.Call, ast.AST | None]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope
            if isinstance(child, ast.Call):
                yield child, scope
            yield from walk(child, inner)

    return walk(tree, None)


def _lines(source: _Source, tree: ast.Module, path: Path, where: str) -> list[ErrorLine]:
    found: list[ErrorLine] = []
    for call, scope in _enclosing_functions(tree):
        argument = _message_argument(call, source.error_classes, where)
        if argument is None:
            continue
        for text in _Renderer(source, path, scope).texts(argument):
            if _has_own_text(text):
                found.append(ErrorLine(normalized(text), f"{where}:{call.lineno}"))
    return found


@cache
def _source() -> _Source:
    return _Source()


def lines_in(tree: ast.Module, where: str) -> list[ErrorLine]:
    """The lines one module (not among the packages) would show or log, read as the packages' are."""
    return _lines(_source(), tree, ROOT / where, where) + _logged_lines(_source(), tree, ROOT / where, where)


@cache
def _all_lines() -> tuple[ErrorLine, ...]:
    source = _source()
    found: list[ErrorLine] = []
    for path, tree in source.files.items():
        found += _lines(source, tree, path, str(path.relative_to(ROOT)))
    for name, value in source.constants[BANNERS].items():
        if name.endswith("_TEXT"):
            for text in _Renderer(source, BANNERS, None).texts(value):
                found.append(ErrorLine(normalized(re.sub(r"\{[^{}]*\}", FILLED, text)),
                                       f"{BANNERS.relative_to(ROOT)}:{value.lineno}"))
    return tuple(found) + tuple(_page_lines()) + tuple(parser_lines()) + tuple(log_lines())


# argparse's own errors (`usage: …` then `elicitron CMD: error: <line>`, exit 2): each template
# below, when some command's parser has what can give it.
_ARGPARSE_TEMPLATES = {
    "required": "the following arguments are required: %s",
    "unrecognized": "unrecognized arguments: %s",
    "choice": "invalid choice: %(value)r (choose from %(choices)s)",
    "one": "expected one argument",
    "type": "invalid %(type)s value: %(value)r",
    "explicit": "ignored explicit argument %r",
    "at_least_one": "expected at least one argument",
    "exclusive": "not allowed with argument %s",
    "one_of": "one of the arguments %s is required",
    "ambiguous": "ambiguous option: %(option)s could match %(matches)s",
}
_ARGUMENT_ERRORS = {"choice", "one", "type", "explicit", "at_least_one", "exclusive"}  # "argument …: " first


def _can_give(parser: argparse.ArgumentParser) -> set[str]:
    kinds = {"unrecognized"}
    longs = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.required:
            kinds.add("required")
        if action.choices is not None:
            kinds.add("choice")
        if action.type is not None:
            kinds.add("type")
        if action.nargs == "+":
            kinds.add("at_least_one")
        if action.option_strings:
            kinds.add("explicit" if action.nargs == 0 else "one" if action.nargs is None else "")
            longs += [option for option in action.option_strings if option.startswith("--")]
    for group in parser._mutually_exclusive_groups:
        kinds.add("exclusive")
        if group.required:
            kinds.add("one_of")
    if parser.allow_abbrev and any(a != b and b.startswith(a[:3]) for a in longs for b in longs):
        kinds.add("ambiguous")
    return kinds - {""}


def parser_lines() -> list[ErrorLine]:
    """argparse's errors that some command's parser can give, each with the first command that can,
    checked against argparse's own source (a template it no longer has fails here)."""
    import inspect

    from docs_kit import commands

    source = inspect.getsource(argparse)
    found: dict[str, str] = {}
    for command, parser in commands().items():
        for kind in sorted(_can_give(parser)):
            found.setdefault(kind, command)
    lines = []
    for kind, command in sorted(found.items()):
        template = _ARGPARSE_TEMPLATES[kind]
        assert f"'{template}'" in source, f"argparse no longer has {template!r}"
        text = re.sub(r"%(\([a-z_]+\))?[sr]", FILLED, template)
        lines.append(ErrorLine(normalized(f"argument {FILLED}: {text}" if kind in _ARGUMENT_ERRORS else text),
                               f"argparse ({command})"))
    return lines


# The web page's one-line states: what its status line, a card's problem line or the pairing
# page's result is set to (a literal, or a literal joined with what the page fills in).
_JS_TEXT = re.compile(r'"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`')
_PAGE_SINK = re.compile(r"""(?<!function )(?:setStatus\(|\.textContent = )((?:"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`|'(?:[^'\\]|\\.)*'|[^;"`'])*);""")
STATIC = ROOT / "web_process" / "static"


def _page_lines() -> Iterator[ErrorLine]:
    for path in sorted(STATIC.glob("*.js")):
        script = path.read_text(encoding="utf-8")
        for statement in _PAGE_SINK.finditer(script):
            expression = statement[1]
            line = script.count("\n", 0, statement.start()) + 1
            for literal in _JS_TEXT.finditer(expression):
                text = literal[1] if literal[1] is not None else re.sub(r"\$\{(?:[^{}]|\{[^{}]*\})*\}", FILLED, literal[2])
                if expression[:literal.start()].rstrip().endswith("+"):
                    text = FILLED + text
                if expression[literal.end():].lstrip().startswith("+"):
                    text += FILLED
                if text[:1].isupper():  # a sentence, not a value compared ("granted") or a separator
                    yield ErrorLine(normalized(text), f"{path.relative_to(ROOT)}:{line}")


# What the processes log for a person to read (main's log file, a terminal, web.stderr.log, a
# window's log): warnings and errors, not info or debug. `logger.X(message, ...)` on a module's
# logger; a RateLimitedLog's `X(key, message, ...)` and `log(level, key, message, ...)`.
_LOGGED = {"warning", "error", "critical", "exception"}
_QUIET = {"DEBUG", "INFO"}  # levels of `.log(level, ...)` that are not problems
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")


def _loggers(tree: ast.Module) -> set[str]:
    """The names a module's loggers go by: each `NAME = logging.getLogger(...)` and each
    `NAME = RateLimitedLog(...)` (attributes too: `self._complaints`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _called_name(node.value) in ("getLogger", "RateLimitedLog"):
            names |= {target.id if isinstance(target, ast.Name) else target.attr for target in node.targets
                      if isinstance(target, ast.Name | ast.Attribute)}
    return names


def _logged_message(call: ast.Call, loggers: set[str]) -> ast.expr | None:
    """The message of a warning or error `call` logs, if it is one."""
    if not isinstance(call.func, ast.Attribute):
        return None
    owner, level = call.func.value, call.func.attr
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
    if name not in loggers:
        return None
    limited = bool(call.args) and isinstance(call.args[0], ast.Tuple)  # RateLimitedLog: its key comes first
    if level == "log":
        if not call.args or ast.unparse(call.args[0]).rsplit(".", 1)[-1] in _QUIET:
            return None
        position = 2 if len(call.args) > 1 and isinstance(call.args[1], ast.Tuple) else 1
    elif level in _LOGGED:
        position = 1 if limited else 0
    else:
        return None
    return call.args[position] if position < len(call.args) else None


def _filled_in(message: str, values: list[tuple[ast.expr, list[str]]]) -> list[str]:
    """A %-message with its values put in. A message with no text of its own (`"%s: %s", server,
    text`) shows what its values hold: each is followed (a text built before the call); in any
    other, a `%s` shows a name's text only when that is fixed (an environment variable's name),
    and the rest is FILLED, as another's error passed on has its own row."""
    passes_on = not _has_own_text(_PERCENT.sub(FILLED, message))
    pieces = re.split(r"(%%|" + _PERCENT.pattern + ")", message)
    texts, position = [""], 0
    for index, piece in enumerate(pieces):
        if index % 2 == 0 or piece == "%%":
            texts = [text + piece.replace("%%", "%") for text in texts]
            continue
        value, shown = values[position] if position < len(values) else (None, [FILLED])
        fixed = isinstance(value, ast.Name) and not any(FILLED in text for text in shown)
        position += 1
        texts = [text + part for text in texts for part in (shown if piece == "%s" and (passes_on or fixed)
                                                                 else [FILLED])]
    return texts


def _logged_lines(source: _Source, tree: ast.Module, path: Path, where: str) -> list[ErrorLine]:
    loggers = _loggers(tree)
    found: list[ErrorLine] = []
    for call, scope in _enclosing_functions(tree):
        argument = _logged_message(call, loggers)
        if argument is None:
            continue
        renderer = _Renderer(source, path, scope)
        values = call.args[call.args.index(argument) + 1:]
        for message in renderer.texts(argument):
            for text in _filled_in(message, [(value, renderer.texts(value)) for value in values]):
                if _has_own_text(text):
                    found.append(ErrorLine(normalized(text), f"{where}:{call.lineno}"))
    return found


def log_lines() -> list[ErrorLine]:
    """The warnings and errors the processes log: each message's text, %-placeholders FILLED
    (`%%` is a percent sign)."""
    source = _source()
    return [line for path, tree in source.files.items()
            for line in _logged_lines(source, tree, path, str(path.relative_to(ROOT)))]


def error_lines() -> list[ErrorLine]:
    """Every line with text of its own, once per place that makes it."""
    return list(_all_lines())


def wire_codes() -> list[str]:
    """The `code` strings of the wire's `error` topic (a window or `elicitron` shows them)."""
    from shared.errors import WireCode

    return [code.value for code in WireCode]


def rpc_codes() -> list[str]:
    """The JSON-RPC error codes main answers requests with (`elicitron call` and hosts show them)."""
    from shared.errors import RpcCode

    return [str(int(code)) for code in RpcCode]
