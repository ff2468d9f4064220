"""grammar/pitstop.ebnf is the reference grammar: its examples parse and round-trip, it names
every node of pitstop.sql.nodes, and it is well-formed ISO EBNF."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from sqlglot import exp

from pitstop.sql import nodes
from pitstop.sql.dialect import PitstopDialect
from pitstop.sql.parser import parse_script, parse_statement

GRAMMAR_PATH = Path(__file__).resolve().parents[1] / "grammar" / "pitstop.ebnf"
GRAMMAR = GRAMMAR_PATH.read_text(encoding="utf-8")

_EXAMPLE = re.compile(r"^\s*\(\*\s*example:\s*(?P<sql>.*?)\s*\*\)\s*$")
_NODE = re.compile(r"^\s*\(\*\s*node:\s*(?P<name>\w+)\s*\*\)\s*$")
_RULE_START = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*)\s*=")


def examples() -> list[str]:
    return [m["sql"] for line in GRAMMAR.splitlines() if (m := _EXAMPLE.match(line))]


def node_comments() -> dict[str, str]:
    """Node class name -> the rule defined right after its ``(* node: X *)`` comment."""
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in GRAMMAR.splitlines():
        if m := _NODE.match(line):
            pending.append(m["name"])
        elif m := _RULE_START.match(line):
            for name in pending:
                found[name] = m["name"]
            pending = []
    assert not pending, f"node comments without a rule after them: {pending}"
    return found


def node_classes() -> list[type[exp.Expression]]:
    return [
        cls
        for _, cls in inspect.getmembers(nodes, inspect.isclass)
        if issubclass(cls, exp.Expression) and cls.__module__ == nodes.__name__
    ]


def sql(node: exp.Expression) -> str:
    return node.sql(dialect=PitstopDialect)


# Examples ---------------------------------------------------------------------------------


def test_the_grammar_has_examples() -> None:
    assert len(examples()) >= 40


@pytest.mark.parametrize("example", examples())
def test_every_example_parses_and_round_trips(example: str) -> None:
    (parsed,) = parse_script(example + ";")
    canonical = sql(parsed.node)
    assert sql(parse_statement(canonical)) == canonical


def test_examples_cannot_close_the_comment_they_sit_in() -> None:
    for example in examples():
        assert "*)" not in example and "(*" not in example, example


# Nodes ------------------------------------------------------------------------------------


def test_every_node_class_is_named_next_to_a_rule() -> None:
    named = node_comments()
    missing = [cls.__name__ for cls in node_classes() if cls.__name__ not in named]
    assert not missing, f"add a (* node: X *) comment above the rule for: {missing}"
    unknown = sorted(set(named) - {cls.__name__ for cls in node_classes()})
    assert not unknown, f"node comments name classes that do not exist: {unknown}"


def test_statement_nodes_list_every_top_level_statement_class() -> None:
    top_level = {type(parse_statement(example)) for example in examples()}
    statements = top_level - {exp.Select, exp.Union}
    assert statements <= set(nodes.STATEMENT_NODES), statements - set(nodes.STATEMENT_NODES)


def test_every_statement_node_is_what_some_example_parses_into() -> None:
    top_level = {type(parse_statement(example)) for example in examples()}
    missing = [cls.__name__ for cls in nodes.STATEMENT_NODES if cls not in top_level]
    assert not missing, f"add an (* example: ... *) for: {missing}"


def test_every_inner_node_appears_in_some_example() -> None:
    inner = set(node_classes()) - set(nodes.STATEMENT_NODES)
    seen = {type(n) for example in examples() for n in parse_statement(example).walk()}
    assert not inner - seen, sorted(cls.__name__ for cls in inner - seen)


# Well-formedness ----------------------------------------------------------------------------

_SYMBOLS = set("=,|[]{}();-")


def ebnf_tokens(text: str) -> list[str]:
    """Meta-identifiers, terminals (as ``'"x"'``), special sequences (``'?'``) and symbols;
    comments, which nest, are dropped."""
    tokens: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if text.startswith("(*", i):
            depth = 0
            while True:
                assert i < len(text), "unterminated comment"
                if text.startswith("(*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*)", i):
                    depth, i = depth - 1, i + 2
                    if depth == 0:
                        break
                else:
                    i += 1
        elif char.isspace():
            i += 1
        elif char in "\"'?":
            end = text.index(char, i + 1)
            assert end > i + 1 or char == "?", f"empty terminal at offset {i}"
            tokens.append(char if char == "?" else text[i : end + 1])
            i = end + 1
        elif char.isalpha() or char == "_":
            m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(text, i)
            assert m is not None
            tokens.append(m.group(0))
            i = m.end()
        elif char in _SYMBOLS:
            tokens.append(char)
            i += 1
        else:
            raise AssertionError(f"unexpected {char!r} at offset {i}: {text[i - 20 : i + 20]!r}")
    return tokens


def rules() -> dict[str, list[str]]:
    """Rule name -> the tokens of its definition; asserts each rule has ``name = ... ;``,
    balanced brackets, and is defined once."""
    tokens = ebnf_tokens(GRAMMAR)
    result: dict[str, list[str]] = {}
    i = 0
    while i < len(tokens):
        name = tokens[i]
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", name) and tokens[i + 1] == "=", tokens[i : i + 3]
        end = tokens.index(";", i)
        body = tokens[i + 2 : end]
        assert body, f"rule {name} is empty"
        assert name not in result, f"rule {name} is defined twice"
        stack: list[str] = []
        for token in body:
            if token in "([{":
                stack.append({"(": ")", "[": "]", "{": "}"}[token])
            elif token in ")]}":
                assert stack and stack.pop() == token, f"unbalanced {token} in rule {name}"
        assert not stack, f"unclosed bracket in rule {name}"
        result[name] = body
        i = end + 1
    return result


def references(body: list[str]) -> set[str]:
    return {token for token in body if re.fullmatch(r"[a-z_][a-z0-9_]*", token)}


def test_the_grammar_is_well_formed_ebnf() -> None:
    defined = rules()
    used = set().union(*(references(body) for body in defined.values()))
    assert not used - set(defined), f"used but not defined: {sorted(used - set(defined))}"

    reachable, todo = set(), ["script"]
    while todo:
        name = todo.pop()
        if name not in reachable:
            reachable.add(name)
            todo.extend(references(defined[name]))
    assert set(defined) == reachable, f"not reachable from script: {sorted(set(defined) - reachable)}"


def test_every_node_comment_sits_on_a_defined_rule() -> None:
    defined = rules()
    for node, rule in node_comments().items():
        assert rule in defined, (node, rule)
