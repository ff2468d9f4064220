"""Did you mean: one comparison (:func:`pitstop.spelling.closest`) behind every suggestion."""

from __future__ import annotations

from pitstop.spelling import close_name, closest
from pitstop.sql.typos import close_keywords
from pitstop.sql.words import did_you_mean


def test_closest_returns_the_candidate_as_it_is_spelt_when_case_is_folded() -> None:
    assert closest("ORDRES", ["Orders", "payments"], fold=str.lower) == ["Orders"]
    assert closest("ORDRES", ["Orders", "payments"]) == []  # case counts without fold


def test_closest_keeps_the_last_spelling_of_candidates_that_fold_alike() -> None:
    assert closest("order", ["ORDERS", "Orders"], fold=str.lower) == ["Orders"]


def test_closest_honours_the_cutoff() -> None:
    assert closest("sasl.pasword", ["sasl.password"], cutoff=0.85) == ["sasl.password"]
    assert closest("sasl.mechanism", ["sasl.password"], cutoff=0.85) == []


def test_closest_lists_up_to_n_candidates_closest_first() -> None:
    assert closest("FORM", ["FROM", "FOR", "FORMAT", "WHERE"], cutoff=0.7, n=3) == ["FOR", "FORMAT", "FROM"]
    assert closest("FORM", ["FROM", "FOR", "FORMAT", "WHERE"], cutoff=0.7, n=1) == ["FOR"]


def test_close_name_quotes_the_name_in_parentheses_or_says_nothing() -> None:
    assert close_name("ordrs", ["orders", "daily"]) == " (did you mean 'orders'?)"
    assert close_name("zzz", ["orders", "daily"]) == ""


def test_did_you_mean_names_a_keyword_but_never_the_word_itself() -> None:
    assert did_you_mean("jbo", ["JOB", "MAPPING"]) == "; did you mean JOB?"
    assert did_you_mean("job", ["JOB", "MAPPING"]) == ""


def test_close_keywords_are_never_the_keyword_itself() -> None:
    assert close_keywords("form") == ["FOR", "FROM"]
    assert close_keywords("buy") == ["BY"]
    assert close_keywords("from") == []
