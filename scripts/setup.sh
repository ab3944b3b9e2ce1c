#!/usr/bin/env bash
# Create .venv (once) and install fdeval into it with the CPU-only dependencies.
# EXTRAS selects optional dependency groups (default: test; empty: none); torch is pinned to the CPU wheel.
# A venv that is already current is left alone (no pip: a relaunch starts in well under a second).
# .venv/.fdeval-setup.json records what the last install was made from: hashes of pyproject.toml
# and this script, the venv's python version, and the extras installed so far. Current means: the
# same sources and python, the requested extras among those installed (so run_default.sh's none
# are covered by test.sh's test,asr), fdeval importing from this checkout, and every requirement of
# the requested extras installed at a version that satisfies it. Anything else installs as before.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
EXTRAS=${EXTRAS-test}

# stamp check|write EXTRAS: check exits 0 when the venv is current (and says so), 1 with the reason
# when not; write records the install just made.
stamp() {
  # -I: neither the working directory nor PYTHONPATH may supply the fdeval that is checked
  .venv/bin/python -I - "$1" "$PWD" "$2" <<'EOF'
import hashlib, json, os, re, sys
from importlib import metadata

mode, root, extras_arg = sys.argv[1:4]
path = os.path.join(root, ".venv", ".fdeval-setup.json")


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def sources():
    out = {"python": sys.version}
    for f in ("pyproject.toml", "scripts/setup.sh"):
        with open(os.path.join(root, f), "rb") as fh:
            out[f] = hashlib.sha256(fh.read()).hexdigest()
    return out


def recorded():
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def requirements():
    try:
        from packaging.requirements import Requirement
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement
    return [Requirement(r) for r in metadata.requires("fdeval") or ()]


def closure(reqs, extras):
    """`extras` and the extras they name in turn (test = fdeval[moshi-client,...,gemini,piper])."""
    want, grew = set(extras), True
    while grew:
        grew = False
        for r in reqs:
            if canon(r.name) == "fdeval" and r.marker and any(r.marker.evaluate({"extra": e}) for e in want):
                new = {canon(x) for x in r.extras} - want
                want |= new
                grew = grew or bool(new)
    return want


def unmet(reqs, want):
    """The first requirement of fdeval[want] that the venv lacks or has at a version outside its range."""
    for r in reqs:
        if canon(r.name) == "fdeval" or (r.marker and not any(r.marker.evaluate({"extra": e}) for e in want | {""})):
            continue
        try:
            v = metadata.version(r.name)
        except metadata.PackageNotFoundError:
            return f"{r.name} is not installed"
        if r.specifier and not r.specifier.contains(v, prereleases=True):
            return f"{r.name} {v} does not satisfy {r.specifier}"
    return None


def problem(extras):
    old = recorded()
    if old is None:
        return "no record of an earlier install"
    if old.get("sources") != sources():
        return "pyproject.toml, scripts/setup.sh or the venv's python changed since the last install"
    try:
        import fdeval
    except Exception as e:
        return f"import fdeval fails ({type(e).__name__}: {e})"
    where = os.path.realpath(os.path.dirname(fdeval.__file__ or ""))
    if where != os.path.realpath(os.path.join(root, "fdeval")):
        return f"fdeval imports from {where}, not from this checkout"
    try:
        reqs = requirements()
        want = closure(reqs, extras)
        if missing := sorted(want - closure(reqs, old.get("extras", []))):
            return f"extras not installed yet: {','.join(missing)}"
        return unmet(reqs, want)
    except Exception as e:  # unreadable metadata is a broken install too
        return f"cannot read fdeval's requirements ({type(e).__name__}: {e})"


extras = sorted({canon(e.strip()) for e in extras_arg.split(",") if e.strip()})
if mode == "check":
    why = problem(extras)
    if why is None:
        print(f"setup: .venv is current (extras: {','.join(extras) or 'none'}); nothing to install")
        sys.exit(0)
    print(f"setup: installing into .venv: {why}")
    sys.exit(1)
old = recorded() or {}
# extras installed earlier from the same sources are still there: a later, smaller request is covered
kept = old.get("extras", []) if old.get("sources") == sources() else []
tmp = f"{path}.tmp"
with open(tmp, "w") as fh:
    json.dump({"sources": sources(), "extras": sorted(set(kept) | set(extras))}, fh, indent=1)
os.replace(tmp, path)
EOF
}

if stamp check "$EXTRAS"; then
  exit 0
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
if [ -n "$EXTRAS" ]; then
  python -m pip install -q -e ".[$EXTRAS]"
else
  python -m pip install -q -e .
fi
stamp write "$EXTRAS"
