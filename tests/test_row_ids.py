"""The ids of audit rows no window answers (main_process/consent/row_ids.py): unique on a main and
between mains, in the order they were made, and never mistaken for a reply channel."""

from main_process.consent.row_ids import PREFIX, RowIds
from shared import channels


def test_ids_are_unique_ordered_and_not_reply_channels() -> None:
    ids = RowIds()
    made = [ids.next() for _ in range(2_000)]
    assert len(set(made)) == len(made)
    assert made == sorted(made)  # one main's rows sort in the order they were decided
    assert all(row_id.startswith(PREFIX) and not channels.is_result_channel(row_id) for row_id in made)


def test_two_mains_never_make_the_same_id() -> None:
    one, other = RowIds(), RowIds()
    assert {one.next() for _ in range(100)}.isdisjoint({other.next() for _ in range(100)})
