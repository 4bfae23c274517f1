"""What consent.py needs to apply a policy's verdict: the audit's id for it (the host's denial is
consent/denial.py's, with the policy's id and reason), and what a verdict on an elicitation means.

An elicitation (action `elicit`) is asked of the policies when a server elicits in a host's relayed
session, form requests only: a `forbid` declines it (audited with the policy's id and reason); a
`permit` changes nothing (a policy cannot fill a form: the usual flow, rules then a card, decides).
URL requests and sign-ins are never answered by a policy: a person opens those or nobody does."""

from main_process.policy.engine import Verdict
from main_process.policy.load import PolicyInfo


def audit_id(policy: PolicyInfo) -> str:
    """In the audit's rule column, beside rule ids (r-…, config ids): `policy:<id>`."""
    return f"policy:{policy.id}"


def declining(verdict: Verdict | None) -> PolicyInfo | None:
    """The policy that declines an elicitation, if the verdict is a forbid."""
    if verdict is None or verdict.decision != "forbid":
        return None
    return verdict.policy
