"""What consent.py needs to apply a policy's verdict: the audit's id for it (the host's denial is
consent/denial.py's, with the policy's id and reason)."""

from main_process.policy.load import PolicyInfo


def audit_id(policy: PolicyInfo) -> str:
    """In the audit's rule column, beside rule ids (r-…, config ids): `policy:<id>`."""
    return f"policy:{policy.id}"
