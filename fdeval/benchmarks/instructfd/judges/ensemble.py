"""A judge that asks several judges and takes the majority.

``EnsembleJudge(judges=[...], tie_breaker=None)``: each member judges the pair; the verdict is the
label (``adhere`` / ``not_adhere``) given by more than half of the members that did **not** answer
``error``. When no label has such a majority:

* all members answered ``error`` -> ``error`` (nothing to vote on);
* a tie (as many ``adhere`` as ``not_adhere``) -> ``error`` ("the judges disagree"), unless
  ``tie_breaker`` names a member (its index in ``judges`` or its judge id) whose verdict is not
  ``error``: then that member's verdict decides. A tie-breaker that itself answered ``error``
  leaves the tie an ``error``.

The reasoning lists every member's verdict and reasoning; ``checks`` holds one
``<member id> adheres`` entry per member that gave a label. ``prompt_hash`` hashes the members'
ids, versions and prompt hashes, the tie-breaker and :data:`ENSEMBLE_VERSION`, so a change in any
member changes it; :meth:`EnsembleJudge.identity` lists the members' identities (an LLM member's
includes its endpoint). Members are judge instances or configs with a Hydra ``_target_`` (as in
``conf/judge/ensemble.yaml``); errors a member raises (e.g. an LLM judge without an API key, or
one whose endpoint cannot be reached) propagate.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from fdeval.benchmarks.instructfd.judges.base import Judge
from fdeval.benchmarks.instructfd.records import Verdict
from fdeval.errors import ConfigError
from fdeval.types import TestCase, Transcript

ENSEMBLE_VERSION = "1"


def _member(spec: Any, i: int) -> Judge:
    if isinstance(spec, Judge):
        return spec
    if isinstance(spec, (dict, DictConfig)) and "_target_" in spec:
        judge = instantiate(OmegaConf.create(spec) if isinstance(spec, dict) else spec)
        if isinstance(judge, Judge):
            return judge
        raise ConfigError(f"judge.judges[{i}]: {spec['_target_']} is not a Judge")
    raise ConfigError(
        f"judge.judges[{i}]: expected a judge or a config with _target_, got {type(spec).__name__}"
    )


class EnsembleJudge(Judge):
    """Majority vote of member judges over their non-error verdicts (see the module docstring)."""

    version = ENSEMBLE_VERSION

    def __init__(self, judges: Sequence[Any], tie_breaker: int | str | None = None):
        if judges is None or isinstance(judges, (str, bytes)) or len(judges) == 0:
            raise ConfigError("judge.judges: an ensemble needs at least one member judge")
        self.members: list[Judge] = [_member(spec, i) for i, spec in enumerate(judges)]
        ids = [m.id for m in self.members]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"judge.judges: member ids must differ, got {ids}")
        self.tie_breaker: int | None = None
        if tie_breaker is not None:
            if isinstance(tie_breaker, bool):
                raise ConfigError(
                    f"judge.tie_breaker: expected a member index or id, got {tie_breaker!r}"
                )
            if isinstance(tie_breaker, int):
                if not 0 <= tie_breaker < len(self.members):
                    raise ConfigError(
                        f"judge.tie_breaker: index {tie_breaker} is out of range 0..{len(self.members) - 1}"
                    )
                self.tie_breaker = tie_breaker
            elif str(tie_breaker) in ids:
                self.tie_breaker = ids.index(str(tie_breaker))
            else:
                raise ConfigError(
                    f"judge.tie_breaker: {tie_breaker!r} is not a member id; valid: {ids}"
                )
        self.id = f"ensemble[{'+'.join(ids)}]"

    @property
    def prompt_hash(self) -> str:
        blob = json.dumps(
            {
                "version": self.version,
                "tie_breaker": self.tie_breaker,
                "members": [[m.id, m.version, m.prompt_hash] for m in self.members],
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def identity(self) -> dict[str, Any]:
        """The ensemble's provenance, tie-breaker and each member's identity (or provenance)."""
        members = [
            m.identity() if callable(getattr(m, "identity", None)) else m.provenance()
            for m in self.members
        ]
        return {**self.provenance(), "tie_breaker": self.tie_breaker, "members": members}

    def check_ready(self) -> None:
        """Each member's own ``check_ready`` (e.g. the LLM judge's key and SDK check), where it has one."""
        for m in self.members:
            if callable(getattr(m, "check_ready", None)):
                m.check_ready()

    def judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        votes = [m.judge(case, policy, transcript) for m in self.members]
        labelled = [v for v in votes if v.verdict != "error"]
        n_yes = sum(v.verdict == "adhere" for v in labelled)
        n_no = len(labelled) - n_yes
        tally = f"{n_yes} adhere, {n_no} not_adhere, {len(votes) - len(labelled)} error"
        if not labelled:
            label, why = "error", f"every member judge answered error ({tally})"
        elif n_yes != n_no:
            label = "adhere" if n_yes > n_no else "not_adhere"
            why = f"majority {label} ({tally})"
        elif self.tie_breaker is not None and votes[self.tie_breaker].verdict != "error":
            label = votes[self.tie_breaker].verdict
            why = f"tie ({tally}), broken by {self.members[self.tie_breaker].id}: {label}"
        else:
            extra = (
                ""
                if self.tie_breaker is None
                else f"; tie-breaker {self.members[self.tie_breaker].id} answered error"
            )
            label, why = "error", f"the member judges disagree: tie ({tally}){extra}"
        lines = [
            f"Ensemble {self.id} (v{self.version}, prompt {self.prompt_hash}): {why}.",
            "Member verdicts: "
            + ", ".join(f"{m.id}={v.verdict}" for m, v in zip(self.members, votes))
            + ".",
        ]
        for m, v in zip(self.members, votes):
            lines.append(
                f"--- {m.id} ({v.verdict}, v{v.judge_version}, prompt {v.prompt_hash}) ---"
            )
            lines.append(v.reasoning.strip())
        checks = {
            f"{m.id} adheres": v.verdict == "adhere"
            for m, v in zip(self.members, votes)
            if v.verdict != "error"
        }
        return self.verdict(case.case_id, policy, label, "\n".join(lines), checks)
