"""The point life cycle as a table, without any scheduler: every path the drivers take, and what cannot happen."""

from __future__ import annotations

import pytest

from ddlio.jobstates import RUNNING, STATES, TERMINAL, WAITING, Kind
from experiments.run.lifecycle import (
    ENDED,
    LIVE,
    TABLE,
    Action,
    Event,
    IllegalTransition,
    Life,
    State,
    scheduler_event,
    step,
    stored_state,
)


def walk(start: State, *events: Event) -> list[tuple[State, Action]]:
    """(state after, action) for each event, from ``start``."""
    life = Life(start)
    out = []
    for e in events:
        action = life.on(e)
        out.append((life.state, action))
    return out


def test_a_local_point_new_to_completed():
    assert walk(State.NEW, Event.MEASURE, Event.SUBMIT_OK, Event.RESULT) == [
        (State.CLAIMED, Action.SUBMIT), (State.SUBMITTED, Action.WAIT), (State.COMPLETED, Action.STORE)]


def test_a_slurm_point_waits_queued_for_as_long_as_it_is_queued():
    events = [Event.MEASURE, Event.SUBMIT_OK] + [Event.QUEUED] * 1000 + [Event.STARTED, Event.FAILURE]
    path = walk(State.NEW, *events)
    assert {p for p in path[2:-2]} == {(State.QUEUED, Action.WAIT)}  # no amount of waiting makes it anything else
    assert path[-2:] == [(State.RUNNING, Action.WAIT), (State.FAILED, Action.STORE)]


def test_a_failed_or_lost_point_is_measured_again_and_ends_completed():
    assert walk(State.SUBMITTED, Event.GONE, Event.MEASURE, Event.SUBMIT_OK, Event.RESULT)[-1] == (
        State.COMPLETED, Action.STORE)
    assert walk(State.FAILED, Event.MEASURE)[-1] == (State.CLAIMED, Action.SUBMIT)
    assert walk(State.COMPLETED, Event.MEASURE)[-1] == (State.CLAIMED, Action.SUBMIT)  # force=true


def test_a_site_limit_holds_the_point_until_a_slot_frees():
    assert walk(State.NEW, Event.MEASURE, Event.LIMITED, Event.SLOT_FREE, Event.SUBMIT_OK) == [
        (State.CLAIMED, Action.SUBMIT), (State.HELD, Action.WAIT), (State.CLAIMED, Action.SUBMIT),
        (State.SUBMITTED, Action.WAIT)]


def test_a_point_another_driver_holds_is_followed_and_its_outcome_reported():
    assert walk(State.NEW, Event.OTHER_DRIVER, Event.ADOPT_RESULT) == [
        (State.NEW, Action.FOLLOW), (State.COMPLETED, Action.REPORT)]
    assert walk(State.SUBMITTED, Event.OTHER_DRIVER, Event.ADOPT_FAILURE)[-1] == (State.FAILED, Action.REPORT)


def test_a_submission_refused_for_good_is_stored_failed():
    """sbatch refuses a point by a limit below one job: no job went out, the point fails (found by CI: the driver
    raised IllegalTransition and the point stayed claimed)."""
    assert walk(State.NEW, Event.MEASURE, Event.FAILURE)[-1] == (State.FAILED, Action.STORE)
    assert walk(State.NEW, Event.MEASURE, Event.LIMITED, Event.FAILURE)[-1] == (State.FAILED, Action.STORE)


def test_a_late_result_of_a_point_given_up_on_is_stored():
    assert walk(State.FAILED, Event.RESULT) == [(State.COMPLETED, Action.STORE)]


@pytest.mark.parametrize("state, event", [
    (State.NEW, Event.SUBMIT_OK),  # a job goes out only for a claimed point
    (State.COMPLETED, Event.SUBMIT_OK),
    (State.CLAIMED, Event.RESULT),  # no job yet: no outcome
    (State.HELD, Event.OTHER_DRIVER),  # this driver holds a held point
    (State.QUEUED, Event.MEASURE),  # a live job is never submitted again
    (State.RUNNING, Event.MEASURE),
    (State.SUBMITTED, Event.MEASURE),
    (State.COMPLETED, Event.GONE),
])
def test_what_cannot_happen_raises(state, event):
    with pytest.raises(IllegalTransition, match=f"'{state.value}' cannot see event '{event.value}'"):
        step(state, event)


def test_every_state_is_reachable_and_a_job_out_is_never_submitted_again():
    seen, frontier = {State.NEW}, [State.NEW]
    while frontier:
        s = frontier.pop()
        for (a, _), (b, _) in TABLE.items():
            if a == s and b not in seen:
                seen.add(b)
                frontier.append(b)
    assert seen == set(State)
    for (state, _), (_, action) in TABLE.items():
        if state in LIVE:
            assert action is not Action.SUBMIT
    assert all(nxt in ENDED for (s, e), (nxt, a) in TABLE.items() if a is Action.STORE)


@pytest.mark.parametrize("row, state", [
    (None, State.NEW),
    ({"status": "claimed", "pending": False}, State.NEW),
    ({"status": "submitted", "pending": True, "job_id": "7"}, State.SUBMITTED),
    ({"status": "completed", "pending": True, "job_id": "7"}, State.SUBMITTED),  # a re-measure's job is out
    ({"status": "completed", "pending": False}, State.COMPLETED),
    ({"status": "failed", "pending": False, "job_state": "TIMEOUT", "outcome": "failed"}, State.FAILED),
    ({"status": "failed", "pending": False, "job_state": "LOST", "outcome": "lost"}, State.LOST),
    # the stored outcome decides, not the scheduler's word: a job that ended COMPLETED without a record is lost
    ({"status": "failed", "pending": False, "job_state": "COMPLETED", "outcome": "lost"}, State.LOST),
    ({"status": "failed", "pending": False, "job_state": "LOST", "outcome": "failed"}, State.FAILED),
    # a row stored before outcomes were: its error's words tell
    ({"status": "failed", "job_state": "VANISHED", "error": "job 7 ended VANISHED without a result"}, State.LOST),
    ({"status": "failed", "job_state": "TIMEOUT", "error": "TimeLimitError: the point's limit"}, State.FAILED),
])
def test_stored_state(row, state):
    assert stored_state(row) is state


def test_scheduler_states():
    assert scheduler_event("PENDING") is Event.QUEUED and scheduler_event("REQUEUED") is Event.QUEUED
    assert scheduler_event("RUNNING") is Event.STARTED
    assert scheduler_event("COMPLETED") is None and scheduler_event("TIMEOUT") is None


@pytest.mark.parametrize("state", sorted(STATES))
def test_the_life_cycle_reads_each_scheduler_state_by_its_kind(state):
    """One table of Slurm's states (ddlio.jobstates) and one reading of it: waiting or starting is queued, running
    started, terminal ends the job (its record decides)."""
    expected = {Kind.WAITING: Event.QUEUED, Kind.STARTING: Event.QUEUED, Kind.RUNNING: Event.STARTED,
                Kind.TERMINAL: None}[STATES[state]]
    assert scheduler_event(state) is expected
    assert (state in WAITING, state in RUNNING, state in TERMINAL).count(True) == 1
    assert (scheduler_event(state) is Event.QUEUED) == (state in WAITING)
    assert (scheduler_event(state) is Event.STARTED) == (state in RUNNING)
    assert (scheduler_event(state) is None) == (state in TERMINAL)
