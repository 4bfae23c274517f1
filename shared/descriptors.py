"""The process's open-file limit: raised at start from the soft limit (often 1,024) toward the hard
one, so listeners can be capped well below it and accept never hits EMFILE."""

import resource

CEILING = 65_536  # enough for any cap of ours; a hard limit of "unlimited" is not taken literally


def raise_soft_limit(ceiling: int = CEILING) -> int:
    """Raise the soft RLIMIT_NOFILE toward the hard limit (at most `ceiling`); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # e.g. a sandbox that refuses: the caps below are sized from the limit we have
    return soft
