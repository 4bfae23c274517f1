"""What consent.py needs to apply a policy's verdict: the audit's id for it and the host's sentence."""

from main_process.policy.load import PolicyInfo


def audit_id(policy: PolicyInfo) -> str:
    """In the audit's rule column, beside rule ids (r-…, config ids): `policy:<id>`."""
    return f"policy:{policy.id}"


def denial_sentence(server: str, tool: str, policy: PolicyInfo) -> str:
    """The denied tool result's text: which policy and why, and what the model should do (the
    same advice as a rule's denial: the user's configuration says no, asking again will not help)."""
    why = f": {policy.reason.rstrip('.')}" if policy.reason else ""
    return (f"Policy {policy.id!r} in the user's Elicitron configuration forbids this call{why}. "
            f"{server}/{tool} was not called. Do not retry it; continue without it, or ask the user to "
            "change the policy.")
