"""The redaction rules, as pure functions: DSNs, URLs, secret pairs, placeholders, fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chongming.logs.redaction import (
    MASK,
    is_secret_name,
    redact_text,
    redact_value,
    scrub,
    secret_placeholders,
)

CANARY = "Cn4ry-s3cr3t"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # passwords in DSNs, in every form the stores accept
        ("postgresql://app:Cn4ry-s3cr3t@db:5432/x", "postgresql://app:***@db:5432/x"),
        ("postgres://app:p@ss/wo#rd@db/x", "postgres://app:***@db/x"),
        ("postgresql://db/x?user=app&password=Cn4ry", "postgresql://db/x?user=***&password=***"),
        (
            "host=db user=app password='a b Cn4ry' dbname=x",
            "host=db user=app password=*** dbname=x",
        ),
        ("host=db password=Cn4ry dbname=x", "host=db password=*** dbname=x"),
        # every query value of any URL; the path and host stay
        (
            "GET https://s3.example.com/b/k?X-Amz-Signature=abc&page=2 -> 200",
            "GET https://s3.example.com/b/k?X-Amz-Signature=***&page=*** -> 200",
        ),
        ("see https://example.com/docs/page", "see https://example.com/docs/page"),
        # token / key / secret / password fields in text
        ("token=abc123 user=bob", "token=*** user=bob"),
        ('{"api_key": "abc def", "n": 1}', '{"api_key": ***, "n": 1}'),
        ("client_secret: xyz; next", "client_secret: ***; next"),
        ("DB_PASSWORD=hunter2", "DB_PASSWORD=***"),
        ("Authorization: Bearer eyJhbGciOi.x.y", "Authorization: ***"),
        ("X-Auth-Token: 12345", "X-Auth-Token: ***"),
        ("passkey=abc", "passkey=***"),
        ("nothing secret here, 42 rows", "nothing secret here, 42 rows"),
        # an exception type is not a field: its message stays (a secret in it still goes)
        ("KeyError: 'missing'", "KeyError: 'missing'"),
        ("TokenExpiredError: expired at 12:00", "TokenExpiredError: expired at 12:00"),
        ("KeyError: 'token=abc'", "KeyError: 'token=***'"),
    ],
)
def test_text_is_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_known_secrets_are_scrubbed_wherever_they_appear() -> None:
    text = f"driver said: bad auth for {CANARY} (user app)"
    assert redact_text(text, {CANARY}) == "driver said: bad auth for *** (user app)"
    assert scrub("abcabc", {"abc", "abcabc"}) == MASK  # longest first


def test_names_that_hold_secrets() -> None:
    for name in ("token", "api_key", "X-Api-Key", "client_secret", "Password", "cookie", "pwd"):
        assert is_secret_name(name), name
    for other in ("user", "rows", "host", 3, None):
        assert not is_secret_name(other), other


def test_values_are_walked_and_masked_by_name() -> None:
    value = {
        "user": "bob",
        "token": CANARY,
        "nested": [{"password": CANARY}, f"postgresql://u:{CANARY}@h/db", ("key", 1)],
        "count": 3,
    }
    assert redact_value(value) == {
        "user": "bob",
        "token": MASK,
        "nested": [{"password": MASK}, "postgresql://u:***@h/db", ("key", 1)],
        "count": 3,
    }
    deep: object = CANARY
    for _ in range(30):
        deep = [deep]
    assert CANARY not in repr(redact_value(deep))


def test_placeholders_after_a_secret_name_are_found() -> None:
    assert secret_placeholders("login as %s with token %s") == (1,)
    assert secret_placeholders("key=%r, rows %d, 100%% done, password: %s") == (0, 2)
    assert secret_placeholders("%s %s") == ()


@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@given(
    st.sampled_from(["token", "api_key", "secret", "password", "Authorization"]),
    st.sampled_from(["=", ": ", " = ", '": "']),
    st.text(
        alphabet=st.characters(whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters="-_."),
        min_size=4,
        max_size=40,
    ),
    st.text(max_size=30),
)
def test_a_secret_pair_never_survives(name: str, sep: str, secret: str, prefix: str) -> None:
    text = f"{prefix} {name}{sep}{secret} trailing"
    assert secret not in redact_text(text).replace(prefix, "", 1)
