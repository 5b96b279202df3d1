"""Render the hook reference (``docs/hooks.md``) from the hookspec docstrings.

The contract is written once, in :mod:`pageant.hookspecs.specs`; this module turns it into
Markdown so the reference can never say something the code does not. Regenerate with::

    python -m pageant.kit.hookdocs docs/hooks.md

Every hookspec docstring must follow the template (a summary, then ``When:``,
``Returns:``, ``On failure:``, ``Example::`` with an indented code block, and ``Added in
contract X.Y.``), and so must every protocol the contract hands a plugin (a summary,
``When:``, ``Example::`` and ``Added in contract``); :func:`render` raises
:class:`UndocumentedHook` naming the hook or protocol and the missing part otherwise.
Write an example as ``ruff format`` would: CI checks the code blocks of ``docs/hooks.md``.
"""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from pageant.hookspecs import (
    Declarations,
    GameLink,
    HostSettings,
    PluginContext,
    StepServices,
    specs,
)
from pageant.hookspecs.specs import PageantSpecs

#: The parts every hookspec docstring must have, in the order they are written.
REQUIRED = ("When:", "Returns:", "On failure:", "Example:", "Added in contract")
#: The parts every protocol's docstring must have.
PROTOCOL_REQUIRED = ("When:", "Example:", "Added in contract")
#: The protocols the contract hands a plugin, in the order the reference shows them.
PROTOCOLS: tuple[type, ...] = (PluginContext, StepServices, Declarations, HostSettings, GameLink)

_BANNER = re.compile(r"^\s*#\s*──\s*(?P<title>[^─]+?)\s*─*\s*$")
_ROLE = re.compile(r":\w+:`(?P<tilde>~?)(?P<target>[^`]+)`")
_LITERAL = re.compile(r"``(?P<text>[^`]+)``")
_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
_LABEL = re.compile(r"^(?P<label>When|Returns|On failure|Parameters):\s*(?P<rest>.*)$", re.S)

HEADER = """\
# Hook reference

<!-- Rendered from hookspecs/specs.py by `python -m pageant.kit.hookdocs docs/hooks.md`.
     Edit the docstrings there, not this file: a test fails when the two differ. -->

Every hook a pageant plugin may implement. A plugin marks each one with
`@pageant.hookimpl`; the host refuses a plugin with a hook it does not know, a hook without
the marker, or a hook that takes an argument the host does not pass (a hook may take fewer).
Declaration hooks and `pageant_startup` are plain functions; `pageant_reconcile` and
`pageant_shutdown` are `async def`. What the host hands a plugin (its context, and the
services a call may use) is described after the hooks, as the `typing.Protocol`s of
`pageant.hookspecs` a plugin can type against. How to write a plugin around these hooks is
in [plugin-authors.md](plugin-authors.md).
"""


class UndocumentedHook(ValueError):
    """A hookspec whose docstring does not follow the template."""


@dataclass(frozen=True)
class Hook:
    """One hookspec, as the reference shows it."""

    name: str
    arguments: tuple[str, ...]
    returns: str
    is_async: bool
    group: str
    doc: str

    @property
    def signature(self) -> str:
        prefix = "async def " if self.is_async else "def "
        return f"{prefix}{self.name}({', '.join(self.arguments)}) -> {self.returns}"

    @property
    def summary(self) -> str:
        return _markdown(self.doc.split("\n\n", 1)[0]).replace("\n", " ")


def _groups() -> dict[str, str]:
    """Hook name -> the banner comment above it in specs.py (the grouping lives there)."""
    lines, _ = inspect.getsourcelines(specs)
    found: dict[str, str] = {}
    current = "Hooks"
    for line in lines:
        banner = _BANNER.match(line)
        if banner:
            title = banner.group("title")
            current = title[0].upper() + title[1:]
            continue
        defined = re.match(r"^\s*(?:async )?def (pageant_\w+)\(", line)
        if defined:
            found[defined.group(1)] = current
    return found


def hooks() -> list[Hook]:
    """Every hookspec, in the order specs.py declares them."""
    from pageant.plugins.loader import ASYNC_HOOKS

    groups = _groups()
    declared = {n for n, _ in inspect.getmembers(PageantSpecs) if n.startswith("pageant_")}
    if declared != set(groups):
        # A hook the source scan missed would vanish from the reference without a word.
        raise UndocumentedHook(f"hooks not found in specs.py: {sorted(declared - set(groups))}")
    out = []
    for name in groups:
        fn = getattr(PageantSpecs, name)
        doc = inspect.getdoc(fn) or ""
        check_docstring(name, doc)
        signature = inspect.signature(fn)
        arguments = tuple(_parameter(p) for n, p in signature.parameters.items() if n != "self")
        returns = str(signature.return_annotation)
        out.append(Hook(name, arguments, returns, name in ASYNC_HOOKS, groups[name], doc))
    return out


def check_docstring(name: str, doc: str, required: tuple[str, ...] = REQUIRED) -> None:
    """Raise :class:`UndocumentedHook` unless ``doc`` has a summary and every required part;
    an ``Example:`` needs an indented code block after it."""
    missing = [part for part in required if part not in doc]
    if "Example:" in required and "Example:" in doc and not _example_code(doc):
        missing.append("Example: code (indented under Example::)")
    if not doc.strip() or doc.lstrip().startswith(required) or missing:
        raise UndocumentedHook(
            f"{name}: the docstring lacks {', '.join(missing) or 'a summary'}; "
            f"expected a summary, then {', '.join(required)}"
        )


def _example_code(doc: str) -> str:
    """The indented block after ``Example::``, dedented; empty when there is none."""
    _, found, after = doc.partition("Example:")
    if not found:
        return ""
    lines = after.lstrip(":").split("\n")[1:]
    code: list[str] = []
    for line in lines:
        if line.strip() and not line.startswith("    "):
            break
        code.append(line)
    return textwrap.dedent("\n".join(code)).strip("\n")


@dataclass(frozen=True)
class Member:
    """One attribute or method of a protocol, as the reference shows it."""

    signature: str
    doc: str


@dataclass(frozen=True)
class ProtocolDoc:
    """One protocol of the contract, as the reference shows it."""

    name: str
    doc: str
    members: tuple[Member, ...]


def protocols() -> list[ProtocolDoc]:
    """Every protocol the contract hands a plugin, each checked against its template."""
    out = []
    for cls in PROTOCOLS:
        doc = inspect.getdoc(cls) or ""
        check_docstring(cls.__name__, doc, PROTOCOL_REQUIRED)
        members = []
        for name, value in vars(cls).items():
            if name.startswith("_"):
                continue
            members.append(_member(name, value))
        out.append(ProtocolDoc(cls.__name__, doc, tuple(members)))
    return out


def _parameter(parameter: inspect.Parameter) -> str:
    """``name: annotation`` as written in the source (annotations are strings there)."""
    if parameter.annotation is parameter.empty:
        return parameter.name
    return f"{parameter.name}: {parameter.annotation}"


def _member(name: str, value: Any) -> Member:
    if isinstance(value, property):
        fget: Any = value.fget
        shown = f"{name}: {fget.__annotations__.get('return', 'Any')}"
        return Member(shown, inspect.getdoc(fget) or "")
    signature = inspect.signature(value)
    parameters = [_parameter(p) for p in signature.parameters.values() if p.name != "self"]
    prefix = "async def " if inspect.iscoroutinefunction(value) else "def "
    returns = signature.return_annotation
    shown = f"{prefix}{name}({', '.join(parameters)}) -> {returns}"
    return Member(shown, inspect.getdoc(value) or "")


def _markdown(text: str) -> str:
    """Sphinx roles and double-backtick literals as Markdown code."""

    def role(match: re.Match[str]) -> str:
        target = match.group("target")
        return f"`{target.rsplit('.', 1)[-1] if match.group('tilde') else target}`"

    return _LITERAL.sub(lambda m: f"`{m.group('text')}`", _ROLE.sub(role, text))


def _parameters(body: str) -> list[str]:
    """``name: text`` entries (continuations indented further) as a Markdown list."""
    items: list[str] = []
    for line in body.splitlines():
        if not line.strip():
            continue
        if line.startswith("    ") and items:
            items[-1] += " " + line.strip()
            continue
        name, _, text = line.strip().partition(":")
        items.append(f"- `{name.strip()}`: {text.strip()}")
    return items


def _section(hook: Hook) -> list[str]:
    out = [f"### `{hook.name}`", "", "```python", hook.signature, "```", ""]
    return out + _body(hook.doc)


def _body(doc: str, members: tuple[Member, ...] = ()) -> list[str]:
    """A docstring as Markdown; ``members`` are listed before its example."""
    # Paragraphs split at any run of blank lines: an example's code with two blank lines
    # between its functions must not leave a paragraph that starts with a newline and so
    # escapes the indented-code check below (it was rendered a second time, as prose).
    paragraphs = _PARAGRAPH_BREAK.split(doc)
    out = [_markdown(paragraphs[0]), ""]
    for paragraph in paragraphs[1:]:
        labelled = _LABEL.match(paragraph)
        if paragraph.startswith("    "):
            continue  # the example's code, rendered with its label
        if paragraph.startswith("Example:"):
            if members:
                out += ["**Members:**", ""]
                for member in members:
                    text = _markdown(member.doc).replace("\n", " ")
                    out.append(f"- `{member.signature}`" + (f": {text}" if text else ""))
                out.append("")
            out += ["**Example:**", "", "```python", _example_code(doc), "```", ""]
        elif labelled and labelled.group("label") == "Parameters":
            out += ["**Parameters:**", "", *_parameters(_markdown(labelled.group("rest"))), ""]
        elif labelled:
            out += [f"**{labelled.group('label')}:** {_markdown(labelled.group('rest'))}", ""]
        elif paragraph.startswith("Added in contract"):
            out += [f"*{paragraph.strip()}*", ""]
        else:
            out += [_markdown(paragraph), ""]
    return out


def _protocol_section(protocol: ProtocolDoc) -> list[str]:
    return [f"### `{protocol.name}`", "", *_body(protocol.doc, protocol.members)]


def render() -> str:
    """The whole of ``docs/hooks.md``."""
    all_hooks = hooks()
    all_protocols = protocols()
    out = [HEADER, "| hook | called | summary |", "| --- | --- | --- |"]
    for hook in all_hooks:
        called = "awaited" if hook.is_async else "plainly"
        out.append(f"| [`{hook.name}`](#{hook.name}) | {called} | {hook.summary} |")
    out.append("")
    group = None
    for hook in all_hooks:
        if hook.group != group:
            group = hook.group
            out += [f"## {group}", ""]
        out += _section(hook)
    out += [
        "## What the host hands a plugin",
        "",
        "Protocols in `pageant.hookspecs`: the host's objects satisfy them, and a plugin types",
        "against them without importing anything of the host.",
        "",
    ]
    for protocol in all_protocols:
        out += _protocol_section(protocol)
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m pageant.kit.hookdocs [PATH]``: write the reference to PATH, or print it."""
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args:
        with open(args[0], "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
