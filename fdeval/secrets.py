"""Which environment variables hold credentials, and environments without them.

Keys come from the environment only and reach only the processes that need them: a model server
gets the variables its spec names (`fdeval.models.servers.server_environment`), espeak-ng workers
and realtime client processes get none unless their model declares it reads them
(`DuplexModel.env_keys`), and a Slurm task only the keys of its array's steps
(`fdeval.cluster.slurm.array_keys`: the model's in the run array, the judge's in the post array).
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping

# A key, token, secret or cloud credential by its name (HF_TOKEN too, though HF_ is otherwise allowed).
_SECRET = re.compile(
    r"(API_?KEY|_TOKEN|_KEY)$|SECRET|PASSW|CREDENTIAL|^(ANTHROPIC|OPENAI|GEMINI|GOOGLE|AWS|AZURE)_",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """A variable that holds, by its name, a key, token, secret or cloud credential."""
    return bool(_SECRET.search(name))


def without_secrets(
    environ: Mapping[str, str] | None = None, keep: Iterable[str] = ()
) -> dict[str, str]:
    """`environ` (default os.environ) less every secret variable not named in `keep`."""
    src = os.environ if environ is None else environ
    kept = set(keep)
    return {k: v for k, v in src.items() if k in kept or not is_secret_name(k)}


@contextmanager
def secrets_withheld(keep: Iterable[str] = ()) -> Iterator[None]:
    """While inside, os.environ holds no secret variable but those in `keep`: for children that a
    library starts with the process's own environment (multiprocessing's spawn and its resource
    tracker take no env argument). Restored on exit."""
    kept = set(keep)
    removed = {
        k: os.environ.pop(k) for k in list(os.environ) if is_secret_name(k) and k not in kept
    }
    try:
        yield
    finally:
        os.environ.update(removed)
