"""The scrubber: every planted secret kind removed and reported (kind, file, line), ordinary code untouched."""

from __future__ import annotations

import pytest

from sandgym.errors import ConfigError
from sandgym.private.scrub import Scrubber, parse_patterns, scrub_text

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabcdef==\n-----END RSA PRIVATE KEY-----"
PLANTED = {
    "aws_access_key": 'AWS_ID = "AKIAIOSFODNN7EXAMPLE"',
    "aws_secret_key": 'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "github_token": 'GH = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"',
    "slack_token": 'SLACK = "xoxb-1234567890-abcdefghij"',
    "openai_key": 'OPENAI = "sk-proj-abcdefghijklmnopqrstuvwx1234"',
    "jwt": 'JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"',
    "email": 'CONTACT = "jane.doe@example.com"',
    "secret_assignment": 'api_key = "a8f9d7e6c5b4a3"',
    "private_key": f'KEY = """{PEM}"""',
}
SECRETS = ["AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI", "ghp_abc", "xoxb-", "sk-proj-", "eyJhbGci", "jane.doe@",
           "a8f9d7e6c5b4a3", "MIIEowIBAAKCAQEA7"]


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_each_kind_removed_and_reported(kind: str) -> None:
    text = "import os\n\n" + PLANTED[kind] + "\nprint(os.sep)\n"
    out, found = scrub_text(text, file="conf.py")
    assert [(f.kind, f.file, f.line) for f in found] == [(kind, "conf.py", 3)]
    assert f"<REDACTED:{kind}>" in out and not any(s in out for s in SECRETS)
    assert out.startswith("import os\n\n") and out.endswith("\nprint(os.sep)\n")
    assert not any(s in repr(found) for s in SECRETS)  # the report never holds the secret


def test_all_at_once_lines_are_the_original_lines() -> None:
    text = "\n".join([PLANTED["private_key"], *(v for k, v in PLANTED.items() if k != "private_key")]) + "\n"
    out, found = scrub_text(text, "all.py")
    assert sorted(f.kind for f in found) == sorted(PLANTED)
    assert {f.kind: f.line for f in found}["aws_access_key"] == 5  # after the 4-line PEM block
    assert not any(s in out for s in SECRETS)
    assert scrub_text(out, "all.py")[1] == []  # idempotent: placeholders are not secrets


def test_config_style_token_line() -> None:
    out, found = scrub_text("[auth]\ntoken: abc123def456ghi789\n", "app.ini")
    assert out == "[auth]\ntoken: <REDACTED:secret_assignment>\n" and found[0].line == 2


ORDINARY = '''import getpass

from app.auth import get_token


@decorator
def login(api_key: str, token: str | None = None, password=None) -> str:
    """Log in; see https://example.com/docs for details."""
    token = get_token()
    password = getpass.getpass()
    secret_key = settings.SECRET_KEY
    api_key = os.environ["API_KEY"]
    result = weights @ inputs.T
    sk = "sk-short"
    return f"{token}:{api_key}"  # token = "placeholder"
'''


def test_no_false_positive_on_ordinary_code() -> None:
    out, found = scrub_text(ORDINARY, "auth.py")
    assert found == [] and out == ORDINARY


def test_extra_patterns_and_bad_ones() -> None:
    scrubber = Scrubber(parse_patterns([r"internal_host=db[0-9]+\.corp\.local"]))
    out, found = scrubber.text("HOST = 'db12.corp.local'\n", "s.py")
    assert out == "HOST = '<REDACTED:internal_host>'\n" and found[0].kind == "internal_host"
    with pytest.raises(ConfigError, match="kind=REGEX"):
        parse_patterns(["nonsense"])
    with pytest.raises(ConfigError, match="not a valid regex"):
        Scrubber({"bad": "("})
    with pytest.raises(ConfigError, match="lower_snake_case"):
        Scrubber({"Bad Name": "x"})


def test_files_report_counts() -> None:
    files, report = Scrubber().files({"a.py": PLANTED["email"], "b.py": "x = 1\n"})
    assert files["b.py"] == "x = 1\n" and report.by_kind == {"email": 1}
    assert report.to_json()["findings"] == [{"kind": "email", "file": "a.py", "line": 1}]
