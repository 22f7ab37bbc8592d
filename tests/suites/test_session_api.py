"""The runner's Session meets suites.session_api.SuiteSession, the Protocol the sized plans are typed against: every
attribute it names is set on a Session, every method it names is Session's with the same parameters."""

from __future__ import annotations

import inspect

from benchlib.suites.runner import Session
from benchlib.suites.session_api import SuiteSession
from tests.helpers import make_params


def protocol_methods() -> list[str]:
    """The methods the Protocol itself declares (not what typing.Protocol adds, all underscored)."""
    return [name for name, value in vars(SuiteSession).items()
            if inspect.isfunction(value) and not name.startswith("_")]


def test_a_session_has_every_attribute_the_protocol_names(tmp_path):
    session = Session(make_params("http://127.0.0.1:9/v1"), "text", tmp_path, "r1", "salt")
    named = set(SuiteSession.__annotations__)
    assert named == {"params", "suite", "out_dir", "run_id"}
    missing = [name for name in named if not hasattr(session, name)]
    assert not missing, f"Session lacks {missing}"


def test_each_protocol_method_is_sessions_with_the_same_parameters():
    assert set(protocol_methods()) >= {"window", "base_record", "build", "execute", "run_requests"}
    for name in protocol_methods():
        mine = inspect.signature(getattr(Session, name))
        theirs = inspect.signature(getattr(SuiteSession, name))
        assert [(p.name, p.default) for p in mine.parameters.values()] == \
            [(p.name, p.default) for p in theirs.parameters.values()], f"Session.{name}{mine} vs protocol {theirs}"
