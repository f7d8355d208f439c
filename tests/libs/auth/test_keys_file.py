"""The operator's keys file: valid declarations, and every mistake named by its field."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpd.auth.keys_file import ConfiguredKey, load_keys_file
from mcpd.auth.tokens import digest
from mcpd.model.v1 import enums_pb2
from mcpd.runtime.errors import InvalidArgument

SECRET = "s3cret-for-the-ingest-sidecar"
DIGEST = digest("another-long-enough-secret")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> InvalidArgument:
    path = _write(tmp_path, text)
    with pytest.raises(InvalidArgument) as caught:
        load_keys_file(path)
    assert str(path) in caught.value.message  # every error names the file
    return caught.value


def test_valid_file_loads_every_key_in_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"""
[[keys]]
name = "sidecar"
scope = "ingest"
project = "shop"
secret = "{SECRET}"

[[keys]]
scope = "admin"
projects = ["shop", "billing"]
digest = "sha256:{DIGEST.upper()}"
""",
    )
    assert load_keys_file(path) == [
        ConfiguredKey(
            name="sidecar",
            scope=enums_pb2.KEY_SCOPE_INGEST,
            projects=frozenset({"shop"}),
            digest=digest(SECRET),
        ),
        ConfiguredKey(
            name="keys[1]",
            scope=enums_pb2.KEY_SCOPE_ADMIN,
            projects=frozenset({"shop", "billing"}),
            digest=DIGEST,  # normalised to lower case, like tokens.digest
        ),
    ]


def test_the_secret_is_not_kept(tmp_path: Path) -> None:
    path = _write(tmp_path, f'[[keys]]\nscope = "read"\nproject = "p"\nsecret = "{SECRET}"\n')
    [key] = load_keys_file(path)
    assert SECRET not in repr(key)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # scope
        ('project = "p"\nsecret = "{secret}"', "keys[1].scope"),
        ('scope = "root"\nproject = "p"\nsecret = "{secret}"', "keys[1].scope"),
        ('scope = "READ"\nproject = "p"\nsecret = "{secret}"', "keys[1].scope"),
        ('scope = 2\nproject = "p"\nsecret = "{secret}"', "keys[1].scope"),
        # project / projects
        ('scope = "read"\nsecret = "{secret}"', "keys[1].project"),
        ('scope = "read"\nproject = ""\nsecret = "{secret}"', "keys[1].project"),
        ('scope = "read"\nprojects = []\nsecret = "{secret}"', "keys[1].projects"),
        ('scope = "read"\nprojects = ["a", ""]\nsecret = "{secret}"', "keys[1].projects"),
        ('scope = "read"\nprojects = "a"\nsecret = "{secret}"', "keys[1].projects"),
        (
            'scope = "read"\nproject = "a"\nprojects = ["b"]\nsecret = "{secret}"',
            "keys[1].projects",
        ),
        # secret / digest
        ('scope = "read"\nproject = "p"', "keys[1].secret"),
        ('scope = "read"\nproject = "p"\nsecret = "short"', "keys[1].secret"),
        ('scope = "read"\nproject = "p"\nsecret = "has a space inside it"', "keys[1].secret"),
        ('scope = "read"\nproject = "p"\ndigest = "{digest}"', "keys[1].digest"),
        ('scope = "read"\nproject = "p"\ndigest = "sha256:abc"', "keys[1].digest"),
        ('scope = "read"\nproject = "p"\ndigest = "md5:{digest}"', "keys[1].digest"),
        (
            'scope = "read"\nproject = "p"\nsecret = "{secret}"\ndigest = "sha256:{digest}"',
            "keys[1].digest",
        ),
        # the same key twice
        ('scope = "read"\nproject = "p"\nsecret = "{first}"', "keys[1].secret"),
        # name and unknown fields
        ('name = ""\nscope = "read"\nproject = "p"\nsecret = "{secret}"', "keys[1].name"),
        ('scope = "read"\nproject = "p"\nsecret = "{secret}"\nscopes = ["x"]', "keys[1].scopes"),
    ],
)
def test_each_mistake_names_its_field(tmp_path: Path, body: str, field: str) -> None:
    first = f'[[keys]]\nscope = "read"\nproject = "p"\nsecret = "{SECRET}"\n\n'
    second = body.format(secret="a-second-valid-secret", digest=DIGEST, first=SECRET)
    error = _error(tmp_path, first + "[[keys]]\n" + second + "\n")
    assert error.field == field
    assert field in error.message
    assert SECRET not in error.message  # secrets never end up in messages (and logs)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("", "keys"),
        ("keys = []", "keys"),
        ('keys = "x"', "keys"),
        ('[security]\nkeys_file = "x"', "security"),
        ("keys = [1]", "keys[0]"),
    ],
)
def test_file_level_mistakes(tmp_path: Path, text: str, field: str) -> None:
    assert _error(tmp_path, text).field == field


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    assert "not valid TOML" in _error(tmp_path, "[[keys]\n").message
    with pytest.raises(InvalidArgument, match="cannot read"):
        load_keys_file(tmp_path / "absent.toml")
