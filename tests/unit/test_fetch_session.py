"""KIP-227 fetch sessions: what each request names, and how the session survives errors (no broker)."""

from __future__ import annotations

from mm2py.kafka.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSession

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)
MAX = 1 << 20


def opened(session: FetchSession, positions: dict) -> None:
    request = session.request(positions, MAX, use_session=True)
    assert (request.session_id, request.epoch) == (0, INITIAL_EPOCH) and dict(request.partitions) == positions
    session.answered(request, 0, 41)
    assert (session.session_id, session.epoch) == (41, 1)


def test_an_incremental_request_names_only_what_changed_and_forgets_what_is_gone():
    session = FetchSession()
    opened(session, {A0: 10, A1: 20, B0: 30})
    request = session.request({A0: 15, A1: 20}, MAX, use_session=True)
    assert (request.session_id, request.epoch, request.incremental) == (41, 1, True)
    assert dict(request.partitions) == {A0: 15} and request.forgotten == (B0,)
    session.answered(request, 0, 41)
    assert session.epoch == 2 and session.known == {A0: (15, MAX), A1: (20, MAX)}
    # a changed size counts as a change; an unchanged position is left out
    request = session.request({A0: 15, A1: 20}, MAX // 2, use_session=True)
    assert set(request.partitions) == {A0, A1}
    session.answered(request, 0, 41)
    nothing = session.request({A0: 15, A1: 20}, MAX // 2, use_session=True)
    assert dict(nothing.partitions) == {} and nothing.forgotten == () and nothing.epoch == 3


def test_session_errors_and_a_declined_session_leave_none():
    session = FetchSession()
    opened(session, {A0: 1})
    request = session.request({A0: 2}, MAX, use_session=True)
    session.answered(request, 71, 0)  # INVALID_FETCH_SESSION_EPOCH
    assert (session.session_id, session.known) == (0, {})
    again = session.request({A0: 2}, MAX, use_session=True)
    assert (again.session_id, again.epoch, dict(again.partitions)) == (0, INITIAL_EPOCH, {A0: 2})
    session.answered(again, 0, 0)  # the broker had no room for a session
    assert session.session_id == 0
    assert session.request({A0: 2}, MAX, use_session=True).epoch == INITIAL_EPOCH


def test_an_unanswered_or_failed_request_opens_a_new_session():
    session = FetchSession()
    opened(session, {A0: 1})
    lost = session.request({A0: 2}, MAX, use_session=True)
    retry = session.request({A0: 2}, MAX, use_session=True)  # lost was never answered
    assert (retry.session_id, retry.epoch) == (0, INITIAL_EPOCH)
    session.answered(lost, 0, 41)  # a late answer to a request given up on changes nothing
    assert session.session_id == 0
    session.answered(retry, 0, 42)
    failed = session.request({A0: 3}, MAX, use_session=True)
    session.failed(failed)
    assert session.session_id == 0 and session.known == {}


def test_a_sessionless_request_is_full_and_closes_the_session():
    session = FetchSession()
    opened(session, {A0: 1, A1: 1})
    request = session.request({A0: 5, A1: 1}, MAX, use_session=False)
    assert (request.session_id, request.epoch) == (41, FINAL_EPOCH) and dict(request.partitions) == {A0: 5, A1: 1}
    session.answered(request, 0, 0)
    assert session.session_id == 0
    plain = session.request({A0: 5}, MAX, use_session=False)
    assert (plain.session_id, plain.epoch) == (0, FINAL_EPOCH)


def test_epochs_wrap_to_one():
    session = FetchSession()
    opened(session, {A0: 1})
    session.epoch = (1 << 31) - 1
    request = session.request({A0: 1}, MAX, use_session=True)
    session.answered(request, 0, 41)
    assert session.epoch == 1
