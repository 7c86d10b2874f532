"""One rule for every URL that reaches a committed or published file (the generated workflow, an
index page, a wheel's provenance, a report): it carries no secret.

A URL holds a secret when

- its authority has userinfo: `https://user:TOKEN@host`, and on http(s) even `https://TOKEN@host`
  (GitHub, GitLab and Gemfury all take a bare token as the user name). An ssh user without a
  password (`git@github.com:owner/repo`, `ssh://git@host/…`) is not a secret: ssh authenticates
  with a key, and `git` is every GitHub user's name;
- a query or fragment parameter is named like a credential (`token`, `access_token`, `sig`,
  `X-Amz-Signature`, `password`, `key`, …: TOKEN_NAMES, any case, percent-decoded);
- a query or fragment value, or any part of the URL, looks like an access token: a known token
  prefix (`ghp_`, `github_pat_`, `glpat-`, …), or a query/fragment value of 32 or more
  token characters mixing letters and digits (a signature or an API key; no index, repository or
  attestation address needs one), unless it is named after a digest (`#sha256=…` pins public
  bytes).

`secret_in` says which, `refuse_secrets` turns it into the one UsageError line, and `redacted`
gives a URL without its userinfo for a record that must say where sources came from (a build
still fetches with the credential; only the record drops it).
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from mambawin.errors import UsageError

# Parameter names that carry a credential (compared lower-cased, `-` read as `_`).
TOKEN_NAMES = frozenset(
    {
        "token",
        "access_token",
        "auth",
        "auth_token",
        "private_token",
        "id_token",
        "refresh_token",
        "api_key",
        "apikey",
        "key",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "sig",
        "signature",
        "x_amz_signature",
        "x_amz_credential",
        "x_amz_security_token",
        "x_goog_signature",
        "x_goog_credential",
    }
)
# Parts of a name that make it a credential whatever else it says (`gh_token`, `my-secret`).
_NAME_PARTS = re.compile(r"(token|secret|passw|signature|credential)", re.IGNORECASE)
# Prefixes of the access tokens of common hosts: GitHub (classic, fine-grained, app), GitLab,
# Slack, AWS access key ids, PyPI API tokens.
_TOKEN_PREFIX = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|xox[abprs]-[\w-]{10,}"
    r"|AKIA[0-9A-Z]{16}|pypi-[\w-]{50,})"
)
# A digest names public bytes (pip's `#sha256=…` pins a wheel): long and random, and no secret.
_DIGESTS = frozenset(hashlib.algorithms_guaranteed)
_RANDOM_VALUE = re.compile(r"[A-Za-z0-9_\-+/=.~]{32,}")
_SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")
_SCP_LIKE = re.compile(r"^([^@/\s]+)@([\w.-]+):(?!//)")  # git@github.com:owner/repo
WHERE_SECRETS_GO = (
    "keep the secret out of the URL: a GitHub Actions secret for the workflow, ~/.netrc or "
    "pip's keyring (`keyring set HOST USER`) on your machine"
)


def secret_in(url: str) -> str | None:
    """What in url is a secret (a few words), or None when it holds none."""
    text = url.strip()
    scp = _SCP_LIKE.match(text)
    if scp and "://" not in text:
        user = unquote(scp[1])
        return "a password in its ssh user" if ":" in user else _token_anywhere(text)
    try:
        parts = urlsplit(text)
    except ValueError:  # an unbalanced `[` in the host: judge the text as it is
        return _token_anywhere(text)
    found = _userinfo(parts.netloc, parts.scheme.lower())
    return (
        found
        or _parameters(parts.query, "query")
        or _parameters(parts.fragment, "fragment")
        or _token_anywhere(text)
    )


def _userinfo(netloc: str, scheme: str) -> str | None:
    """userinfo before the last `@` of the authority (RFC 3986: the host follows the last one)."""
    if "@" not in netloc:
        return None
    user = unquote(netloc.rsplit("@", 1)[0])
    if ":" in user:
        return "a password in its user part (user:PASSWORD@)"
    if scheme in _SSH_SCHEMES:
        return None  # an ssh login name: the key authenticates, not the name
    return "a user part (USER@): on https that is where a token goes"


def _parameters(text: str, part: str) -> str | None:
    if not text:
        return None
    for name, value in parse_qsl(text, keep_blank_values=True):
        key = name.strip().lower().replace("-", "_")
        if key in TOKEN_NAMES or _NAME_PARTS.search(key):
            return f"a credential in its {part} ({name}=…)"
        if _looks_random(value) and key not in _DIGESTS:
            return f"a token-like value in its {part} ({name}=…)"
    return None


def _looks_random(value: str) -> bool:
    """32+ token characters with both letters and digits: a signature, key or token."""
    return (
        _RANDOM_VALUE.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


def _token_anywhere(text: str) -> str | None:
    return "an access token (a known token prefix)" if _TOKEN_PREFIX.search(unquote(text)) else None


def refuse_secrets(url: str, where: str, into: str) -> str:
    """url when it holds no secret; else UsageError naming where (`--attestation`, `spec.toml:4:
    torch.index`), what it would leak into (`the workflow file, which is committed`) and where the
    secret goes instead. The URL itself is never echoed: it holds the secret."""
    found = secret_in(url)
    if found is None:
        return url
    msg = (
        f"{where} holds a credential ({found}), and it would be written into {into}: "
        f"{WHERE_SECRETS_GO}"
    )
    raise UsageError(msg)


def redacted(url: str) -> str:
    """url without its userinfo, query and fragment when any of them holds a secret (what a
    record says of a URL the build fetched with a credential); a URL without one as it is."""
    if secret_in(url) is None:
        return url
    scp = _SCP_LIKE.match(url)
    if scp and "://" not in url:
        rest = url[len(scp[1]) + 1 :]
        return rest if secret_in(rest) is None else scp[2]
    try:
        parts = urlsplit(url)
    except ValueError:
        return "a repository URL that held a credential"
    host = parts.netloc.rsplit("@", 1)[-1]
    cleaned = urlunsplit((parts.scheme, host, parts.path, "", ""))
    if secret_in(cleaned) is not None:  # a token in the path itself: say only the host
        return f"{parts.scheme}://{host}/"
    return cleaned


LOCAL_REPOSITORY = "a local repository"


def public_repo(repo: str) -> str:
    """What a wheel may say of the repository its sources came from: a URL without its
    credentials (redacted), or LOCAL_REPOSITORY for a folder or file:// URL of this
    machine (its path names the user's home; the commit beside it says which sources)."""
    text = repo.strip()
    if "://" in text:
        local = text.split("://", 1)[0].lower().endswith("file")  # file://, git+file://
        return LOCAL_REPOSITORY if local else redacted(text)
    if _SCP_LIKE.match(text):  # git@github.com:owner/repo
        return redacted(text)
    return LOCAL_REPOSITORY if text else ""
