"""The environment a recorded run saw, kept as digests: does a later run see the same one?

``mpsprof try RUN_DIR`` and ``mpsprof patch RUN_DIR --prove`` run the recorded script
again, from whatever shell they are typed in. Scripts read settings from environment
variables (``BATCH=128``, ``DATA_DIR``, a collator's delay), and a variable set only for
the profiled run (``BATCH=128 mpsprof run train.py``) is gone in the next command: the
trial then times another workload than the one recorded, and its verdict (faster,
slower, not proven) is about that one. The recording keeps, for each variable of the
shell ``mpsprof run`` was started from, a short keyed digest of its value, never the value
(a token in the environment stays out of the recording and of anything shared from it);
the trial commands compare the digests with their own environment and say which
variables were set, unset or changed since.

Variables that differ between any two shells without changing what a script computes
(the terminal, the shell's own bookkeeping, ssh and multiplexer sessions) are left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

IGNORED_NAMES = frozenset({
    "_", "PWD", "OLDPWD", "SHLVL", "TERM", "COLORTERM", "COLUMNS", "LINES", "DISPLAY", "TMUX", "TMUX_PANE",
    "STY", "WINDOW", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "LS_COLORS", "LSCOLORS", "MAIL", "HISTFILE",
    "HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "SECURITYSESSIONID", "Apple_PubSub_Socket_Render",
    "__CF_USER_TEXT_ENCODING", "__CFBundleIdentifier", "XPC_FLAGS", "XPC_SERVICE_NAME", "LESS", "LESSOPEN",
    "LESSCLOSE", "PAGER", "EDITOR", "VISUAL", "GPG_TTY", "DBUS_SESSION_BUS_ADDRESS", "WINDOWID",
    "MOTD_SHOWN", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
    # per-shell or per-directory bookkeeping of Python version managers: pyenv's shims set
    # PYENV_DIR to the directory `python` is run in (where it looks for .python-version)
    "PYENV_DIR", "CONDA_PROMPT_MODIFIER", "CONDA_SHLVL", "VIRTUAL_ENV_PROMPT", "INSIDE_EMACS", "TERMINAL_EMULATOR",
})  # fmt: skip
IGNORED_PREFIXES = ("TERM_", "ITERM_", "SSH_", "XDG_SESSION", "XDG_VTNR", "XDG_SEAT", "VSCODE_", "KITTY_",
                    "WEZTERM_", "ALACRITTY_", "GIT_ASKPASS", "STARSHIP_", "P9K_", "ZSH_", "BASH_FUNC_",
                    "MPSPROF_")  # fmt: skip
"""``MPSPROF_``: mpsprof's own variables, which it sets for each run it starts."""
KEY = b"mpsprof env digest v1"
"""Keys the digest (BLAKE2b), so a recording's digests are not plain SHA-256 sums to look up."""


def kept(name: str) -> bool:
    return name not in IGNORED_NAMES and not name.startswith(IGNORED_PREFIXES)


def value_digest(name: str, value: str) -> str:
    """12 hex digits of a keyed hash of ``NAME=VALUE``: equal values give equal digests."""
    return hashlib.blake2b(f"{name}={value}".encode("utf-8", "surrogateescape"), key=KEY, digest_size=6).hexdigest()


def digest(environ: Mapping[str, str]) -> dict[str, str]:
    """Name -> digest of its value, for every variable that may change what a script does."""
    return {name: value_digest(name, value) for name, value in sorted(environ.items()) if kept(name)}


def drift(recorded: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, list[str]]:
    """What differs now from the recording: names ``unset`` (set for the recorded run, not
    now), ``changed`` (another value) and ``set`` (not set for the recorded run); empty
    lists where nothing differs. ``recorded`` is the run's ``env_digest``."""
    now = digest(environ)
    return {
        "unset": sorted(name for name in recorded if name not in now),
        "changed": sorted(name for name, d in recorded.items() if name in now and now[name] != d),
        "set": sorted(name for name in now if name not in recorded),
    }


MAX_NAMES = 6


def drift_words(found: Mapping[str, list[str]]) -> str | None:
    """One sentence for the trial commands, or None when the environment is the recorded one."""
    parts = []
    for key, words in (("unset", "set for the recorded run and not now"), ("changed", "set to another value now"),
                       ("set", "set now and not for the recorded run")):  # fmt: skip
        names = list(found.get(key) or [])
        if names:
            shown = ", ".join(names[:MAX_NAMES]) + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")
            parts.append(f"{shown} {'is' if len(names) == 1 else 'are'} {words}")
    if not parts:
        return None
    return ("this shell's environment is not the recorded run's: " + "; ".join(parts) +
            ". The runs use this shell's environment, so they may time another workload than the recorded one; "
            "export the variables as they were (or pass --set env.NAME=VALUE) to compare like with like.")
