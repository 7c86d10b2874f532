"""The one way mambawin runs git: through `proc.run`, with a time limit and git's own reason.

Every call has a deadline (a stalled clone or fetch must not hang `build`), never prompts (stdin is
closed, GIT_TERMINAL_PROMPT=0, ssh in batch mode), allows only ordinary transports (git's `ext::`
helper runs any command it is given), and turns a failure into one UpstreamError line that keeps
git's own reason ("fatal: repository '...' does not exist").
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from mambawin import proc
from mambawin.errors import CommandError, CommandTimeout, ToolNotFound, UpstreamError, UsageError

LOCAL_TIMEOUT = 120.0
NETWORK_TIMEOUT = 1800.0
NETWORK_HINT = "check the URL and network, or pass --repo PATH of a local clone"
# git's remote-helper syntax `transport::address`; `ext::sh -c ...` runs a command.
_REMOTE_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_PROTOCOLS = "file:git:http:https:ssh"
# A transfer slower than 1 KB/s for a minute is a stall: fail it long before NETWORK_TIMEOUT.
_NETWORK_CONFIG = ("-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60")


def check_url(url: str) -> None:
    """UsageError for a `transport::address` URL (ext:: and other remote helpers), or one that
    git would read as an option (`--upload-pack=...` runs a command)."""
    check_not_option(url, "--repo")
    if _REMOTE_HELPER.match(url):
        msg = (
            f"repository {url!r} uses git's remote-helper syntax (transport::address), which "
            "can run arbitrary commands: pass an https://, ssh://, file:// URL or a local path"
        )
        raise UsageError(msg)


def check_not_option(value: str, flag: str) -> None:
    """UsageError for a value starting with '-', before git can take it as an option."""
    if value.startswith("-"):
        msg = (
            f"{flag} {value!r} starts with '-', which git would read as an option: pass a "
            "URL, a path (./-name for a folder whose name starts with '-') or a ref name"
        )
        raise UsageError(msg)


def check_ref(ref: str, flag: str = "--ref") -> None:
    """UsageError for a ref no git repository can hold, before any clone or fetch: empty, an
    option, or one with a space, `?`, `*`, `[`, `\\`, a line break or another character that does
    not print. git refuses them in a ref name; they reached git, the workflow's matrix and the
    terminal as they were (`v2.2.6\\nevil: 1`, an ESC, `[red]` read as markup)."""
    check_not_option(ref, flag)
    odd = next((c for c in ref if c.isspace() or not c.isprintable() or c in "?*[\\"), None)
    if not ref or odd is not None:
        what = "is empty" if not ref else f"holds {odd!r}, which no git ref can hold"
        msg = f"{flag} {ref!r} {what}: pass a tag, branch or commit, e.g. {flag} v2.2.6"
        raise UsageError(msg)


def git_env() -> dict[str, str]:
    """This environment, with every way git could wait for a person or run a helper shut."""
    env = dict(os.environ)
    env.update(GIT_TERMINAL_PROMPT="0", GCM_INTERACTIVE="never", GIT_ALLOW_PROTOCOL=_PROTOCOLS)
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def run(
    args: Sequence[str | Path],
    *,
    what: str,
    cwd: Path | None = None,
    network: bool = False,
    hint: str = NETWORK_HINT,
    encoding: str | None = None,
) -> proc.Completed:
    """Run `git args`; UpstreamError '<what>: <git's reason>; <hint>' when it fails."""
    timeout = NETWORK_TIMEOUT if network else LOCAL_TIMEOUT
    argv = ["git", *(_NETWORK_CONFIG if network else ()), *args]
    try:
        return proc.run(argv, cwd=cwd, env=git_env(), timeout=timeout, encoding=encoding)
    except ToolNotFound:
        msg = f"{what}: git is not on PATH; install Git (Git for Windows) and put it on PATH"
        raise UpstreamError(msg) from None
    except CommandTimeout:
        msg = f"{what}: git did not finish within {timeout:g} s and was stopped; {hint}"
        raise UpstreamError(msg) from None
    except CommandError as exc:
        raise UpstreamError(f"{what}: {reason(exc.tail or str(exc))}; {hint}") from None


def query(args: Sequence[str | Path], *, cwd: Path | None = None) -> str | None:
    """Stripped stdout of a read-only git command, or None when git says no (exit code != 0)."""
    try:
        done = proc.run(["git", *args], cwd=cwd, env=git_env(), timeout=LOCAL_TIMEOUT, check=False)
    except ToolNotFound:
        msg = "git is not on PATH: install Git (Git for Windows) and put it on PATH"
        raise UpstreamError(msg) from None
    except CommandError as exc:  # a timeout or a git that cannot start
        raise UpstreamError(f"git {' '.join(map(str, args))} failed: {exc}") from None
    return done.stdout.strip() if done.returncode == 0 else None


def reason(output: str) -> str:
    """git's own reason: its first `fatal:`/`error:` line (later ones are generic), else its last
    line."""
    return proc.reason(
        output, markers=("fatal:", "error:"), pick="first", none="git failed without a message"
    )
