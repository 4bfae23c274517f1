"""shared/zmq_calls.py on real zmq sockets: what main's broker and every peer's MainSocket send and
receive per message with the Cython socket calls, frame for frame as pyzmq's multipart calls would."""

import uuid
from collections.abc import Iterator

import pytest
import zmq

from shared.zmq_calls import EVENTS, POLLIN, recv_frames, send_frames, zget


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes], str]]:
    endpoint = f"inproc://zmq-calls-{uuid.uuid4().hex}"
    router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    dealer: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    router.bind(endpoint)
    yield router, dealer, endpoint
    dealer.close(linger=0)
    router.close(linger=0)


def _wait_readable(sock: zmq.Socket[bytes]) -> None:
    assert sock.poll(5000, zmq.POLLIN), "nothing arrived within 5 s"


def test_a_message_arrives_whole_and_in_order(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes], str]) -> None:
    router, dealer, endpoint = pair
    dealer.setsockopt(zmq.ROUTING_ID, b"peer-1")
    dealer.connect(endpoint)
    send_frames(dealer, [b"msgMcpRelay", b"", b"\x00body"])
    _wait_readable(router)
    assert recv_frames(router) == [b"peer-1", b"msgMcpRelay", b"", b"\x00body"]
    assert not zget(router, EVENTS) & POLLIN  # one message sent, one read: nothing left

    send_frames(router, [b"peer-1", b"msgWelcome", b"reply"])
    _wait_readable(dealer)
    assert recv_frames(dealer) == [b"msgWelcome", b"reply"]


def test_nothing_waiting_raises_again(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes], str]) -> None:
    router, dealer, endpoint = pair
    dealer.connect(endpoint)
    assert not zget(router, EVENTS) & POLLIN
    with pytest.raises(zmq.Again):
        recv_frames(router)


def test_a_message_that_cannot_go_leaves_nothing_half_sent(
        pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes], str]) -> None:
    router, dealer, endpoint = pair
    with pytest.raises(zmq.Again):  # no connection yet: a DEALER cannot queue it (MainSocket says so)
        send_frames(dealer, [b"msgHeartbeat", b"first"])
    dealer.setsockopt(zmq.ROUTING_ID, b"peer-2")
    dealer.connect(endpoint)
    send_frames(dealer, [b"msgHeartbeat", b"second"])
    _wait_readable(router)
    assert recv_frames(router) == [b"peer-2", b"msgHeartbeat", b"second"]
    assert not zget(router, EVENTS) & POLLIN
