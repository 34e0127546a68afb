"""Realistic fake secrets, one per built-in rule, generated from a fixed seed.

Each ``Secret`` has the ``text`` to plant and a ``fingerprint``: a distinctive part of
the secret that must not appear anywhere after redaction (catching partial leaks too).
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

_rng = random.Random(20261129)
_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits


def _chars(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _mixed(n: int, alphabet: str = _ALNUM) -> str:
    """n characters with at least one upper case letter, lower case letter and digit."""
    while True:
        text = _chars(n, alphabet)
        if (
            any(c.isupper() for c in text)
            and any(c.islower() for c in text)
            and any(c.isdigit() for c in text)
        ):
            return text


@dataclass(frozen=True)
class Secret:
    rule: str
    text: str
    fingerprint: str


def _secret(rule: str, text: str, fingerprint: str | None = None) -> Secret:
    return Secret(rule, text, fingerprint or text[-16:])


def _jwt() -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(b'{"alg":"HS256","typ":"JWT"}')
    payload = part(f'{{"sub":"{_chars(10)}","exp":1900000000}}'.encode())
    return f"{header}.{payload}.{_chars(43, _ALNUM + '-_')}"


def _pem() -> str:
    body = "\n".join(_chars(64, _ALNUM + "+/") for _ in range(6))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"


OPENAI = _secret("openai_api_key", "sk-proj-" + _chars(48, _ALNUM + "-_") + "T3Bl" + _chars(20))
OPENAI_LEGACY = _secret("openai_api_key", "sk-" + _chars(48))
ANTHROPIC = _secret("anthropic_api_key", "sk-ant-api03-" + _chars(86, _ALNUM + "-_") + "AA")
GITHUB_PAT = _secret("github_token", "ghp_" + _chars(36))
GITHUB_FINE = _secret("github_token", "github_pat_11" + _chars(20) + "_" + _chars(59))
GITHUB_APP = _secret("github_token", "ghs_" + _chars(36))
AWS_ID = _secret("aws_access_key_id", "AKIA" + _chars(16, string.ascii_uppercase + string.digits))
AWS_TEMP_ID = _secret(
    "aws_access_key_id", "ASIA" + _chars(16, string.ascii_uppercase + string.digits)
)
AWS_SECRET = _secret("aws_secret_access_key", _mixed(40, _ALNUM + "/+"))
SLACK = _secret(
    "slack_token", f"xoxb-{_chars(12, string.digits)}-{_chars(13, string.digits)}-{_chars(24)}"
)
GOOGLE = _secret("google_api_key", "AIza" + _chars(35, _ALNUM + "-_"))
STRIPE = _secret("stripe_key", "sk_live_" + _chars(24))
STRIPE_RESTRICTED = _secret("stripe_key", "rk_live_" + _chars(24))
JWT = _secret("jwt", _jwt())
_pem_text = _pem()
PEM = _secret("private_key", _pem_text, _pem_text.split("\n")[3][:24])
_bearer_token = _mixed(32, _ALNUM + "._-")
BEARER = _secret("bearer_token", f"Bearer {_bearer_token}", _bearer_token)
_db_password = _mixed(18)
URL = _secret(
    "url_credentials", f"postgres://admin:{_db_password}@db.internal:5432/app", _db_password
)

HUGGINGFACE = _secret("huggingface_token", "hf_" + _chars(34))
GITLAB = _secret("gitlab_token", "glpat-" + _chars(20, _ALNUM + "-_"))
_webhook = _chars(24)
SLACK_WEBHOOK = _secret(
    "slack_webhook",
    f"https://hooks.slack.com/services/T{_chars(8, _UPPER)}/B{_chars(10, _UPPER)}/{_webhook}",
    _webhook,
)
SENDGRID = _secret(
    "sendgrid_api_key", f"SG.{_chars(22, _ALNUM + '-_')}.{_chars(43, _ALNUM + '-_')}"
)
GOOGLE_OAUTH = _secret("google_oauth_token", "ya29." + _chars(60, _ALNUM + "-_"))
STRIPE_WEBHOOK = _secret("stripe_key", "whsec_" + _chars(32))
NPM = _secret("npm_token", "npm_" + _chars(36))
_account_key = _chars(86, _ALNUM + "+/") + "=="
AZURE_KEY = _secret(
    "azure_storage_key",
    f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={_account_key};",
    _account_key[:24],
)
_sas = _chars(30) + "%2B" + _chars(10) + "%3D"
AZURE_SAS = _secret(
    "azure_sas_signature",
    f"https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&sp=r&sig={_sas}",
    _sas[:24],
)
_basic = base64.b64encode(f"deploy:{_mixed(16)}".encode()).decode()
BASIC = _secret("basic_credentials", f"Basic {_basic}", _basic)
_cli_password = _mixed(14)
CLI_PASSWORD = _secret("cli_password", f"pg_dump --password {_cli_password} app", _cli_password)
_mysql_password = _mixed(12)
MYSQL = _secret("cli_password", f"mysql -u root -p{_mysql_password} app", _mysql_password)
_curl_password = _mixed(12)
CURL = _secret(
    "cli_password", f"curl -u deploy:{_curl_password} https://api.example.com", _curl_password
)
_redis_password = _mixed(20)
REDIS = _secret("url_credentials", f"redis://:{_redis_password}@cache:6379/0", _redis_password)

# Secrets recognisable by their shape, wherever they appear.
SHAPED: tuple[Secret, ...] = (
    OPENAI,
    OPENAI_LEGACY,
    ANTHROPIC,
    GITHUB_PAT,
    GITHUB_FINE,
    GITHUB_APP,
    AWS_ID,
    AWS_TEMP_ID,
    AWS_SECRET,
    SLACK,
    GOOGLE,
    STRIPE,
    STRIPE_RESTRICTED,
    JWT,
    PEM,
    BEARER,
    URL,
    HUGGINGFACE,
    GITLAB,
    SLACK_WEBHOOK,
    SENDGRID,
    GOOGLE_OAUTH,
    STRIPE_WEBHOOK,
    NPM,
    AZURE_KEY,
    AZURE_SAS,
    BASIC,
    CLI_PASSWORD,
    MYSQL,
    CURL,
    REDIS,
)

# Secrets that are plain words: only their key (or "name=value" context) gives them away.
PASSWORD = "correct-horse-battery-" + _chars(6)
SESSION_COOKIE = "sid=" + _chars(24)
PLAIN: tuple[str, ...] = (PASSWORD, SESSION_COOKIE)


# Look-alikes that must come out as they went in: prose, code, ids, hashes, images.
_image = base64.b64encode(random.Random(5).randbytes(3000)).decode()
LOOKALIKES: tuple[str, ...] = (
    "The bearer of this letter holds the basic key to the secret garden; pass it on.",
    "Spin: 3 turns. Pin the tab, then check the session and the token count (1,024).",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "ids: 123e4567-e89b-12d3-a456-426614174000 and 123e4567e89b12d3a456426614174000",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    f"data:image/png;base64,{_image}",
    "def check_password_strength(password):\n    return len(password) > 8  # tokens: 5",
    "mkdir -p build && ssh -p 2222 host && find . -print",
    "curl https://example.com/api/v1/items?page=2 -H 'Accept: application/json'",
    "Basic usage: run the tool with --verbose; see the basic guide.",
    "signature sig=short and AccountKey=",
    "hf_hub_download(repo_id='gpt2') and npm_config_cache and SG.small",
)


def fingerprints() -> list[str]:
    """Every fragment that must never appear in a bundle or an export."""
    return [secret.fingerprint for secret in SHAPED] + list(PLAIN)
