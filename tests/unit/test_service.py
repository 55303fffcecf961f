"""service.keep_running (containerd_config's `service`): one `systemctl show`, decided by the same
rules as rackforge_units, on the real states of Debian 12's systemd 252 (units_helper's captures)."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge.service import keep_running
from units_helper import REAL


class Exit(Exception):
    pass


class FakeModule:
    """Answers `systemctl show` with one captured block and records every other command."""

    def __init__(self, block, check_mode=False, rc=0):
        self.block, self.check_mode, self.rc, self.ran = block, check_mode, rc, []

    def get_bin_path(self, name, required=False):
        return "/bin/" + name

    def run_command(self, argv, environ_update=None):
        if argv[1] == "show":
            return 0, "".join("%s=%s\n" % kv for kv in self.block.items()), ""
        self.ran.append(argv[1:])
        if argv[1] == "status":
            return 3, "containerd.service - failed\n", ""
        return self.rc, "", "Job for containerd.service failed." if self.rc else ""

    def fail_json(self, **kw):
        raise Exit(kw)


@pytest.mark.parametrize(
    "state, changed, actions",
    [
        ("sshd.service", False, []),  # enabled and running, config as it was: nothing runs
        ("sshd.service", True, ["restart containerd.service"]),  # running and its config changed
        ("rf-off.service", False, ["enable containerd.service", "start containerd.service"]),
        ("rf-off.service", True, ["enable containerd.service", "start containerd.service"]),  # stopped: started, not restarted
        ("rf-manual.service", False, ["enable containerd.service"]),  # running, disabled
        ("rf-fail.service", False, ["start containerd.service"]),  # static, failed: started again
    ],
)
def test_what_runs_follows_the_unit_state_and_the_config(state, changed, actions, tmp_path):
    module = FakeModule(REAL[state])
    assert keep_running(module, "containerd.service", changed, "containerd_config", pending_dir=str(tmp_path)) == actions
    assert module.ran == [[a.split()[0], "--", "containerd.service"] for a in actions]
    checked = FakeModule(REAL[state], check_mode=True)
    assert (
        keep_running(checked, "containerd.service", changed, "containerd_config", pending_dir=str(tmp_path)) == actions
        and checked.ran == []
    )


def test_a_unit_not_installed_yet_is_a_start_in_check_mode_and_an_error_otherwise(tmp_path):
    checked = FakeModule(REAL["nosuch.service"], check_mode=True)
    assert keep_running(checked, "containerd.service", True, "containerd_config", True, pending_dir=str(tmp_path)) == [
        "start containerd.service (once installed)"
    ]
    with pytest.raises(Exit) as exc:
        keep_running(FakeModule(REAL["nosuch.service"]), "containerd.service", False, "containerd_config", True, pending_dir=str(tmp_path))
    assert "no such unit" in exc.value.args[0]["msg"]


def test_a_masked_unit_is_refused_and_a_failing_restart_carries_its_evidence(tmp_path):
    with pytest.raises(Exit) as exc:
        keep_running(
            FakeModule(REAL["systemd-logind.service"]), "containerd.service", False, "containerd_config", pending_dir=str(tmp_path)
        )
    assert "is masked" in exc.value.args[0]["msg"]
    failing = FakeModule(REAL["sshd.service"], rc=1)
    with pytest.raises(Exit) as exc:
        keep_running(failing, "containerd.service", True, "containerd_config", pending_dir=str(tmp_path))
    out = exc.value.args[0]
    assert out["rc"] == 1 and out["stderr"] == "Job for containerd.service failed." and "containerd.service - failed" in out["msg"]
    assert failing.ran[-1][0] == "status"


def test_a_restart_left_pending_is_done_by_the_next_call_and_forgotten_only_once_it_succeeded(tmp_path):
    """containerd_config remembers the restart before it writes the config: a run that wrote it but
    could not restart containerd leaves the restart to the next run, whose config is current."""
    from ansible.module_utils.rackforge.service import remember_restart

    pending = tmp_path / "pending"
    remember_restart(FakeModule(REAL["sshd.service"]), ["containerd.service"], "containerd_config", str(pending))
    failing = FakeModule(REAL["sshd.service"], rc=1)
    with pytest.raises(Exit):
        keep_running(failing, "containerd.service", False, "containerd_config", pending_dir=str(pending))
    assert (pending / "containerd.service").exists()  # still pending
    checked = FakeModule(REAL["sshd.service"], check_mode=True)
    assert keep_running(checked, "containerd.service", False, "containerd_config", pending_dir=str(pending)) == [
        "restart containerd.service"
    ]
    assert (pending / "containerd.service").exists()  # check mode forgets nothing
    ok = FakeModule(REAL["sshd.service"])
    assert keep_running(ok, "containerd.service", False, "containerd_config", pending_dir=str(pending)) == ["restart containerd.service"]
    assert not (pending / "containerd.service").exists()
    assert keep_running(FakeModule(REAL["sshd.service"]), "containerd.service", False, "containerd_config", pending_dir=str(pending)) == []
