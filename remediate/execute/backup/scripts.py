"""The shell scripts a backup runs on a broker host, as text: back up, delete, restore, and
read a backup back. Pure: each function only builds a script; operations.py runs it.

The broker needs only POSIX sh, coreutils (sha256sum, wc, od, stat), find and GNU tar with gzip:
no Python. Every command is one `sh -c` script (so the login shell of an ssh user does not
matter), run as root where cluster.yaml says sudo (the transport's doing: remediate/transport.py).
Paths are untrusted text: each reaches the script only as a `shlex.quote`d word, and no path
ever comes back in the output. Requested files are referred to by their index, and the two
things read back by name (the manifest and tar's listing) come back as hex from `od`, so a
name holding a newline or a quote cannot be misread.

Output records, one a line, space-separated (I an index into the request, N a number, H hex):
`P I N SHA` present file (size, sha256), `M I` missing, `O I` not a regular file, `U I`
unreadable, `C I SHA` changed since the backup, `D I` deleted, `R I` still there after rm,
`S I N SHA` a member or restored file read back, `E` the archive already exists,
`K[AM] KIND` and `Q[AM] MODE` type and mode of archive and manifest, `A SHA` the archive's
sha256, `H HEX` the manifest's bytes, `T STATUS HEX` tar's listing, `X STEP` failed at STEP,
and `END` last, so a script cut short is never taken for a complete answer. parse.py reads them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

# The mode of every archive and manifest (the scripts write them under umask 077, chmod 0600).
MODE = 0o600

# Every script starts here: the broker's environment must not change what tar or the digests
# do (TAR_OPTIONS can add --wildcards or --transform), and LC_ALL=C keeps tar's quoting of
# names in the listing byte-exact.
_PRELUDE = """\
unset TAR_OPTIONS GZIP
LC_ALL=C
export LC_ALL
fail() { printf 'X %s\\n' "$1"; exit 1; }
hex() { od -An -tx1 -v | tr -d ' \\n'; }
"""


def _words(values: Sequence[str]) -> str:
    return " ".join(shlex.quote(value) for value in values)


def shell_command(script: str) -> str:
    """The command that runs `script` under sh."""
    return "sh -c " + shlex.quote(script)


def backup_script(directory: str, archive: str, manifest: str, files: Sequence[str]) -> str:
    """Archive the regular files among `files` into `archive` with its `manifest`, in
    `directory`; an archive already there is never touched (E). Prints P, M, O or U for each
    file, then A (the new archive's sha256) and END."""
    q = shlex.quote
    return (
        _PRELUDE
        + f"umask 077\nd={q(directory)}\na={q(archive)}\nm={q(manifest)}\n"
        + 'mkdir -p -- "$d" || fail mkdir\n'
        + 'exists=0\nif [ -e "$a" ] || [ -L "$a" ]; then exists=1; echo E; fi\n'
        + f"set -- {_words(files)}\n"
        # Rotate "$@": each path is shifted off and, if it is a regular file, pushed back
        # relative to / so the same list feeds sha256sum and tar.
        + """\
n=0
bad=0
for p do
  shift
  if [ -L "$p" ] || { [ -e "$p" ] && [ ! -f "$p" ]; }; then echo "O $n"; bad=1
  elif [ -f "$p" ]; then
    if s=$(wc -c < "$p") && h=$(sha256sum < "$p"); then
      echo "P $n $s ${h%% *}"; set -- "$@" "${p#/}"
    else echo "U $n"; bad=1; fi
  else echo "M $n"; fi
  n=$((n+1))
done
[ "$bad" = 0 ] || fail files
if [ "$exists" = 1 ] || [ "$#" = 0 ]; then echo END; exit 0; fi
cd / || fail cd
sha256sum -- "$@" > "$m.partial" || fail manifest
tar --hard-dereference -czf "$a.partial" -C / -- "$@" || fail tar
chmod 0600 -- "$m.partial" "$a.partial" || fail chmod
"""
        # Written aside and renamed, manifest first: an archive under its final name is
        # always complete and has its manifest, so a resumed run may trust its presence.
        + """\
mv -f -- "$m.partial" "$m" || fail rename
mv -f -- "$a.partial" "$a" || fail rename
h=$(sha256sum < "$a") || fail hash
echo "A ${h%% *}"
echo END
"""
    )


def delete_script(archive: str, archive_sha256: str, files: Sequence[tuple[str, str]]) -> str:
    """Remove each of `files` ((sha256, path) pairs) if all still hold their backed-up bytes
    and the archive is still the one verified (else X archive). Prints C, O or U for a file
    that refuses, then D or R for each removed one, and END."""
    q = shlex.quote
    return (
        _PRELUDE
        + f"a={q(archive)}\nwant={q(archive_sha256)}\n"
        # The archive must still be the one that was verified: never delete without it.
        + 'h=$(sha256sum < "$a") && [ "${h%% *}" = "$want" ] || fail archive\n'
        + f"set -- {' '.join(f'{q(sha)} {q(path)}' for sha, path in files)}\n"
        + """\
n=0
bad=0
k=$#
while [ "$k" -gt 0 ]; do
  w=$1; p=$2; shift 2; k=$((k-2))
  if [ -L "$p" ] || { [ -e "$p" ] && [ ! -f "$p" ]; }; then echo "O $n"; bad=1
  elif [ -f "$p" ]; then
    if h=$(sha256sum < "$p"); then
      if [ "${h%% *}" = "$w" ]; then set -- "$@" "$n" "$p"
      else echo "C $n ${h%% *}"; bad=1; fi
    else echo "U $n"; bad=1; fi
  fi
  n=$((n+1))
done
[ "$bad" = 0 ] || fail files
while [ "$#" -gt 0 ]; do
  rm -f -- "$2" || fail rm
  if [ -e "$2" ] || [ -L "$2" ]; then echo "R $1"; else echo "D $1"; fi
  shift 2
done
echo END
"""
    )


def restore_script(
    archive: str, archive_sha256: str, members: Sequence[str], paths: Sequence[str]
) -> str:
    """Extract `members` (paths relative to /) from the archive if it is still the one
    verified (else X archive), then hash each of `paths`: S for a regular file, M otherwise."""
    q = shlex.quote
    return (
        _PRELUDE
        + f"a={q(archive)}\nwant={q(archive_sha256)}\n"
        # Checked again here: the archive verified a moment ago must be the one extracted.
        + 'h=$(sha256sum < "$a") && [ "${h%% *}" = "$want" ] || fail archive\n'
        + f'tar -xpzf "$a" -C / -- {_words(members)} || fail extract\n'
        + f"set -- {_words(paths)}\n"
        + """\
n=0
for p do
  if [ -f "$p" ] && [ ! -L "$p" ] && s=$(wc -c < "$p") && h=$(sha256sum < "$p"); then
    echo "S $n $s ${h%% *}"
  else echo "M $n"; fi
  n=$((n+1))
done
echo END
"""
    )


def read_back_script(archive: str, manifest: str, members: Sequence[str]) -> str:
    """Read a backup back: KA and KM (what archive and manifest are); for two regular files
    also QA and QM (their modes), A (the archive's sha256), H (the manifest), T (tar's listing)
    and S for each of `members` (size and sha256 of its bytes in the archive)."""
    q = shlex.quote
    return (
        _PRELUDE
        + f"a={q(archive)}\nm={q(manifest)}\n"
        + """\
kind() {
  if [ -L "$1" ]; then echo symlink
  elif [ -f "$1" ]; then echo file
  elif [ -e "$1" ]; then echo other
  else echo missing; fi
}
ka=$(kind "$a"); km=$(kind "$m")
echo "KA $ka"
echo "KM $km"
if [ "$ka" != file ] || [ "$km" != file ]; then echo END; exit 0; fi
echo "QA $(stat -c %a -- "$a")"
echo "QM $(stat -c %a -- "$m")"
h=$(sha256sum < "$a") || fail hash
echo "A ${h%% *}"
echo "H $(hex < "$m")"
l=$(tar --quoting-style=escape -tzf "$a")
st=$?
echo "T $st $(printf '%s' "$l" | hex)"
"""
        + f"set -- {_words(members)}\n"
        # tar's complaints go into the digest: a failed extraction can never pass for an
        # empty file. Each member is extracted twice (size, digest); archives here are small.
        + """\
n=0
for r do
  s=$(tar -xzOf "$a" -- "$r" 2>&1 | wc -c)
  h=$(tar -xzOf "$a" -- "$r" 2>&1 | sha256sum)
  echo "S $n $s ${h%% *}"
  n=$((n+1))
done
echo END
"""
    )
