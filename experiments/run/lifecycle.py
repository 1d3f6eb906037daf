"""A point's life cycle as one table: (state, event) -> (next state, action). Pure: no store, no scheduler, no
files. The driver (:mod:`experiments.run.driver`) observes something (the store's row, a claim, sbatch's answer, the
scheduler's state, a record in the run folder), turns it into an event, and does the action the table names. A
pair that is not in the table is a bug in the driver and raises :class:`IllegalTransition`.

A point starts in the state the store holds for it (:func:`stored_state`)::

    new / completed / failed / lost ──MEASURE──▶ claimed ──SUBMIT_OK──▶ submitted ──QUEUED──▶ queued
                                                 claimed ──LIMITED──▶ held ──SLOT_FREE──▶ claimed
    submitted / queued / running ──QUEUED──▶ queued, ──STARTED──▶ running,
                                 ──RESULT──▶ completed, ──FAILURE──▶ failed, ──GONE──▶ lost
    any state but claimed / held / queued / running ──OTHER_DRIVER──▶ (unchanged), then ──ADOPT_*──▶ its outcome

``claimed``: this driver holds the point in the store (an atomic claim) and its job does not exist yet. ``held``:
sbatch refused the job for a site limit that clears as jobs end; it is submitted when a slot frees. ``lost``: the
job ended or vanished without leaving any record. A point stored as ``submitted`` has a job out that no driver
harvested: under this driver's claim the job's outcome is harvested or waited for, never submitted again.
OTHER_DRIVER: another live driver holds the point; this one follows it and reports the outcome that driver stores
(ADOPT_RESULT / ADOPT_FAILURE, action REPORT: it is stored already).
"""

from __future__ import annotations

from enum import Enum

from ddlio import jobstates
from ddlio.records import Outcome


class State(str, Enum):
    NEW = "new"
    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    QUEUED = "queued"
    RUNNING = "running"
    HELD = "held"
    COMPLETED = "completed"
    FAILED = "failed"
    LOST = "lost"


class Event(str, Enum):
    #: the driver measures the point (not measured yet; failed or lost and retried; force=true), under its claim
    MEASURE = "measure"
    #: the scheduler accepted the job
    SUBMIT_OK = "submit_ok"
    #: sbatch refused the job for a limit that clears as jobs end (MaxSubmitJobs, QOS per-user limits)
    LIMITED = "limited"
    #: a slot under that limit is free again
    SLOT_FREE = "slot_free"
    #: the scheduler says the job waits (pending, a throttled array task, requeued)
    QUEUED = "queued"
    #: the scheduler says the job runs
    STARTED = "started"
    #: the job's result record
    RESULT = "result"
    #: the job's failure record (with the scheduler's state when the scheduler ended the job)
    FAILURE = "failure"
    #: the job ended or vanished without leaving any record (killed with its driver, purged ...)
    GONE = "gone"
    #: another live driver holds the point
    OTHER_DRIVER = "other_driver"
    #: the outcome another driver stored for the point is a result / a failure
    ADOPT_RESULT = "adopt_result"
    ADOPT_FAILURE = "adopt_failure"


class Action(str, Enum):
    #: submit the point's job (the point is claimed)
    SUBMIT = "submit"
    #: wait: for the job (its run folder, the scheduler), or for a free slot
    WAIT = "wait"
    #: store the outcome; it is the point's final state in this run unless it is measured again
    STORE = "store"
    #: wait for the outcome the other driver stores
    FOLLOW = "follow"
    #: report an outcome another driver stored, as this run's own
    REPORT = "report"


class IllegalTransition(RuntimeError):
    """An event that cannot happen in that state: a bug in the driver, never a user error."""


LIVE = (State.SUBMITTED, State.QUEUED, State.RUNNING)
ENDED = (State.COMPLETED, State.FAILED, State.LOST)
_NOT_OURS = (State.NEW, State.SUBMITTED, *ENDED)  # states in which another driver may hold the point

#: The life cycle: (state, event) -> (next state, action).
TABLE: dict[tuple[State, Event], tuple[State, Action]] = {
    **{(s, Event.MEASURE): (State.CLAIMED, Action.SUBMIT) for s in (State.NEW, *ENDED)},
    (State.CLAIMED, Event.SUBMIT_OK): (State.SUBMITTED, Action.WAIT),
    (State.CLAIMED, Event.LIMITED): (State.HELD, Action.WAIT),
    (State.HELD, Event.SLOT_FREE): (State.CLAIMED, Action.SUBMIT),
    # sbatch refused the point for good (a limit below one job): stored failed, no job ever went out
    **{(s, Event.FAILURE): (State.FAILED, Action.STORE) for s in (State.CLAIMED, State.HELD)},
    **{(s, Event.QUEUED): (State.QUEUED, Action.WAIT) for s in LIVE},
    **{(s, Event.STARTED): (State.RUNNING, Action.WAIT) for s in LIVE},
    **{(s, Event.RESULT): (State.COMPLETED, Action.STORE) for s in LIVE},
    **{(s, Event.FAILURE): (State.FAILED, Action.STORE) for s in LIVE},
    **{(s, Event.GONE): (State.LOST, Action.STORE) for s in LIVE},
    # a result found after the driver gave up on the job (a slow shared file system): it is the job's outcome
    (State.FAILED, Event.RESULT): (State.COMPLETED, Action.STORE),
    (State.LOST, Event.RESULT): (State.COMPLETED, Action.STORE),
    **{(s, Event.OTHER_DRIVER): (s, Action.FOLLOW) for s in _NOT_OURS},
    **{(s, Event.ADOPT_RESULT): (State.COMPLETED, Action.REPORT) for s in _NOT_OURS},
    **{(s, Event.ADOPT_FAILURE): (State.FAILED, Action.REPORT) for s in _NOT_OURS},
}


def step(state: State, event: Event) -> tuple[State, Action]:
    """The next state and the action for ``event`` in ``state``; raises :class:`IllegalTransition` if the
    table has no such pair."""
    try:
        return TABLE[(state, event)]
    except KeyError:
        raise IllegalTransition(f"a point in state {state.value!r} cannot see event {event.value!r}") from None


def scheduler_event(state: str) -> Event | None:
    """The event a scheduler's job state (Slurm's names) means for a live job: QUEUED, STARTED, or None when the
    job ended (its record, or its absence, decides the outcome). The states' kinds are :data:`ddlio.jobstates.STATES`:
    a job waiting or starting (its nodes readied, CONFIGURING) is queued; a job whose script runs has started."""
    if state in jobstates.WAITING:
        return Event.QUEUED
    if state in jobstates.RUNNING:
        return Event.STARTED
    return None


def stored_state(row: dict | None) -> State:
    """A point's state as the store holds it (the start of this driver's view): no row, or a row claimed without
    a job, is new; a job out and not harvested is submitted; else its last outcome (a failure whose job ended
    without any record is lost)."""
    if row is None:
        return State.NEW
    if row.get("pending") or (row.get("status") == "submitted" and row.get("job_id")):
        return State.SUBMITTED
    if row.get("status") == "completed":
        return State.COMPLETED
    if row.get("status") == "failed":
        lost = Outcome.of_stored("failed", row.get("error"), row.get("outcome")) is Outcome.LOST
        return State.LOST if lost else State.FAILED
    return State.NEW  # claimed by a driver that submitted nothing


class Life:
    """One point's position in the table; :meth:`on` moves it and returns the action to do."""

    def __init__(self, state: State = State.NEW) -> None:
        self.state = state
        self.history: list[tuple[State, Event, State, Action]] = []

    def on(self, event: Event) -> Action:
        nxt, action = step(self.state, event)
        self.history.append((self.state, event, nxt, action))
        self.state = nxt
        return action
