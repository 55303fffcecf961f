"""rackforge_units run by Ansible (ad-hoc, containers.podman.podman connection: the real AnsiballZ
path, module_utils included) against a real systemd 252 as PID 1 in a scratch container of the
lab image, started here as lab/labcore/containers.py starts nodes (runc, lowered ulimits,
--systemd=always) with no network, and removed afterwards. The shared lab's containers are not used.

Test harness, not a simulation: /usr/local/sbin/systemctl (first on the module's search path)
appends each call's arguments to /run/rf-systemctl.log and runs the real /usr/bin/systemctl, so a
test can show which systemctl calls a run made."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CTR = "rackforge-units-test-%d" % os.getpid()
FLAGS = ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", "--systemd=always", "--network", "none"]
SHIM = '#!/bin/sh\n# test harness: record the call, then run the real systemctl\nprintf \'%s\\n\' "$*" >> /run/rf-systemctl.log\nexec /usr/bin/systemctl "$@"\n'
SHOW = "show -p Id,LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload --"


def sh(*argv, check=True):
    return subprocess.run(["podman", "exec", CTR, *argv], capture_output=True, text=True, check=check)


@pytest.fixture(scope="module")
def node():
    image = subprocess.run(["bash", str(ROOT / "lab" / "build-image.sh")], capture_output=True, text=True, check=True).stdout.split()[-1]
    subprocess.run(["podman", "run", "-d", "--name", CTR, *FLAGS, image], capture_output=True, text=True, check=True)
    try:
        for _ in range(120):
            state = sh("systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.5)
        else:
            pytest.fail("scratch container %s: systemd did not finish booting (%s)" % (CTR, state))
        subprocess.run(
            ["podman", "exec", "-i", CTR, "sh", "-c", "cat > /usr/local/sbin/systemctl && chmod 0755 /usr/local/sbin/systemctl"],
            input=SHIM,
            text=True,
            check=True,
        )
        yield CTR
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "0", CTR], capture_output=True, check=False)


def units_module(args, check=False, diff=True):
    """One rackforge_units call through Ansible; (its result, the systemctl calls it made)."""
    sh("rm", "-f", "/run/rf-systemctl.log")
    cmd = ["ansible", "all", "-i", CTR + ",", "-c", "containers.podman.podman", "-m", "rackforge_units", "-a", json.dumps(args)]
    cmd += ["--check"] if check else []
    cmd += ["--diff"] if diff else []
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    try:
        result = json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"][CTR]
    except (ValueError, KeyError, IndexError):
        pytest.fail("ansible printed no result (rc %d):\n%s\n%s" % (res.returncode, res.stdout[-3000:], res.stderr[-3000:]))
    calls = sh("cat", "/run/rf-systemctl.log", check=False).stdout.splitlines()
    return result, calls


def verbs(calls):
    """Each systemctl call without its unit names."""
    return [c.split(" -- ")[0] for c in calls]


def unit_state(name, *props):
    out = sh("/usr/bin/systemctl", "show", "-p", ",".join(props), name).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def node_files(*paths):
    """sha256 (or 'missing') and mode of each path, read in the container."""
    script = 'for p in "$@"; do if [ -e "$p" ]; then echo "$p $(sha256sum < "$p" | cut -c1-16) $(stat -c %a:%U:%G "$p")"; else echo "$p missing"; fi; done'
    return sh("sh", "-c", script, "sh", *paths).stdout


def service(name, script, extra=""):
    return "[Unit]\nDescription=rackforge_units test %s\n[Service]\nExecStart=%s\n%s[Install]\nWantedBy=multi-user.target\n" % (
        name,
        script,
        extra,
    )


def test_converge_then_nothing_then_restart_on_a_changed_script(node):
    script, unit, dropin = "/usr/local/sbin/rf-a", "/etc/systemd/system/rf-a.service", "/etc/systemd/system/rf-a.service.d/10-env.conf"
    files = [
        {"dest": script, "mode": "0755", "content": "#!/bin/sh\n# v1\nexec sleep infinity\n"},
        {"dest": unit, "content": service("a", script)},
    ]
    units = [{"name": "rf-a.service", "enabled": True, "state": "started", "restart_on": [script, dropin]}]
    args = {"files": files, "units": units, "absent": [dropin]}

    res, calls = units_module(args)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] and res["actions"] == [
        "write %s (new)" % script,
        "write %s (new)" % unit,
        "enable rf-a.service",
        "daemon-reload",
        "start rf-a.service",
    ]
    assert res["units"]["rf-a.service"]["before"]["load"] == "not-found"
    assert res["units"]["rf-a.service"]["after"] == {"load": "loaded", "enabled": "enabled", "active": "active", "sub": "running"}
    assert unit_state("rf-a.service", "ActiveState", "UnitFileState") == {"ActiveState": "active", "UnitFileState": "enabled"}
    assert node_files(script).split()[-1] == "755:root:root"
    # the read, the enable, one reload, a verifying read after it, the start, the read of the result
    read = SHOW[: -len(" --")]
    assert verbs(calls) == [read, "--no-reload enable", "daemon-reload", read, "start", read]
    pid = unit_state("rf-a.service", "MainPID")["MainPID"]

    res, calls = units_module(args)
    assert not res["changed"] and res["actions"] == [] and res["changed_files"] == []
    assert calls == [SHOW + " rf-a.service"]  # the one read, nothing else
    assert unit_state("rf-a.service", "MainPID")["MainPID"] == pid

    files[0]["content"] = "#!/bin/sh\n# v2\nexec sleep infinity\n"
    res, calls = units_module(args)
    assert res["actions"] == ["write %s (content)" % script, "restart rf-a.service (changed: %s)" % script]
    assert [c.split(" ")[0] for c in calls] == ["show", "restart", "show"]  # a script is no unit file: no daemon-reload
    assert unit_state("rf-a.service", "MainPID")["MainPID"] != pid and unit_state("rf-a.service", "ActiveState")["ActiveState"] == "active"

    # a drop-in in a directory that does not exist yet: created, reloaded, restarted, in effect
    args = dict(args, absent=[], files=[*files, {"dest": dropin, "content": "[Service]\nEnvironment=RF_MARK=dropin\n"}])
    res, _calls = units_module(args)
    assert res["actions"] == [
        "mkdir /etc/systemd/system/rf-a.service.d",
        "write %s (new)" % dropin,
        "daemon-reload",
        "restart rf-a.service (changed: %s)" % dropin,
    ]
    assert unit_state("rf-a.service", "Environment")["Environment"] == "RF_MARK=dropin"
    res, calls = units_module(args)
    assert res["actions"] == [] and len(calls) == 1

    # mode drift alone is a change (and restarts, as the script is named in restart_on)
    sh("chmod", "0700", script)
    res, _calls = units_module(args)
    assert res["actions"] == ["write %s (mode 0700 -> 0755)" % script, "restart rf-a.service (changed: %s)" % script]
    assert node_files(script).split()[-1] == "755:root:root"

    # the drop-in removed again: gone, reloaded, restarted, no longer in effect
    res, _calls = units_module(dict(args, files=files, absent=[dropin]))
    assert res["actions"] == ["remove %s" % dropin, "daemon-reload", "restart rf-a.service (changed: %s)" % dropin]
    assert unit_state("rf-a.service", "Environment")["Environment"] == ""


def test_a_removed_timer_is_stopped_disabled_and_gone(node):
    timer, svc = "/etc/systemd/system/rf-t.timer", "/etc/systemd/system/rf-t.service"
    files = [
        {"dest": svc, "content": "[Service]\nType=oneshot\nExecStart=/bin/true\n"},
        {"dest": timer, "content": "[Timer]\nOnCalendar=daily\n[Install]\nWantedBy=timers.target\n"},
    ]
    res, _calls = units_module({"files": files, "units": [{"name": "rf-t.timer", "enabled": True, "state": "started"}]})
    assert res["actions"][-1] == "start rf-t.timer" and unit_state("rf-t.timer", "SubState")["SubState"] == "waiting"
    assert sh("test", "-L", "/etc/systemd/system/timers.target.wants/rf-t.timer", check=False).returncode == 0

    args = {"absent": [timer, svc], "units": [{"name": "rf-t.timer", "enabled": False, "state": "stopped"}]}
    res, calls = units_module(args)
    assert res["actions"] == ["stop rf-t.timer", "disable rf-t.timer", "remove %s" % timer, "remove %s" % svc, "daemon-reload"]
    assert res["removed_files"] == [timer, svc]
    assert verbs(calls)[1:5] == ["stop", "--no-reload disable", "--no-reload --runtime disable", "daemon-reload"]
    assert unit_state("rf-t.timer", "LoadState", "ActiveState") == {"LoadState": "not-found", "ActiveState": "inactive"}
    assert sh("test", "-L", "/etc/systemd/system/timers.target.wants/rf-t.timer", check=False).returncode != 0
    assert node_files(timer, svc).split() == [timer, "missing", svc, "missing"]
    res, calls = units_module(args)
    assert res["actions"] == [] and len(calls) == 1  # a unit that is gone and to stay stopped is fine


def test_check_mode_changes_nothing_and_says_what_it_would(node):
    script, unit = "/usr/local/sbin/rf-c", "/etc/systemd/system/rf-c.service"
    files = [
        {"dest": script, "mode": "0755", "content": "#!/bin/sh\nexec sleep infinity\n"},
        {"dest": unit, "content": service("c", script)},
    ]
    args = {"files": files, "units": [{"name": "rf-c.service", "enabled": True, "state": "started", "restart_on": [script]}]}

    res, calls = units_module(args, check=True)  # a fresh node: nothing there yet
    assert res["changed"] and res["actions"] == [
        "write %s (new)" % script,
        "write %s (new)" % unit,
        "enable rf-c.service",
        "daemon-reload",
        "start rf-c.service",
    ]
    assert res["units"]["rf-c.service"]["after"]["active"] == "active"  # predicted
    assert calls == [SHOW + " rf-c.service"] and node_files(script, unit).split() == [script, "missing", unit, "missing"]

    units_module(args)
    before_files, pid = node_files(script, unit), unit_state("rf-c.service", "MainPID")
    files[0]["content"] = "#!/bin/sh\n# changed\nexec sleep infinity\n"
    args["units"][0]["enabled"] = False
    res, calls = units_module(args, check=True)
    assert res["actions"] == [
        "write %s (content)" % script,
        "disable rf-c.service",
        "daemon-reload",
        "restart rf-c.service (changed: %s)" % script,
    ]
    diff = {d["before_header"]: d for d in res["diff"]}
    assert "# changed" in diff[script]["after"] and "# changed" not in diff[script]["before"]
    assert diff["unit rf-c.service"]["before"].startswith("enabled: enabled") and diff["unit rf-c.service"]["after"].startswith(
        "enabled: disabled"
    )
    assert calls == [SHOW + " rf-c.service"]
    assert node_files(script, unit) == before_files and unit_state("rf-c.service", "MainPID") == pid
    assert unit_state("rf-c.service", "UnitFileState")["UnitFileState"] == "enabled"


def test_a_failing_validation_leaves_every_file_as_it_was(node):
    good, bad, conf = "/usr/local/sbin/rf-v", "/usr/local/sbin/rf-v-broken", "/etc/rf-v/new/rf-v.conf"
    units_module({"files": [{"dest": good, "mode": "0755", "content": "#!/bin/sh\necho v1\n"}]})
    before = node_files(good, bad, conf)
    files = [
        {"dest": good, "mode": "0755", "content": "#!/bin/sh\necho v2\n", "validate": ["sh", "-n", "%s"]},
        {"dest": conf, "content": "x=1\n"},  # in directories that do not exist yet
        {"dest": bad, "mode": "0755", "content": "#!/bin/sh\nif then fi\n", "validate": "sh -n %s"},
    ]
    res, calls = units_module({"files": files})
    assert res.get("failed") and res["rc"] != 0 and "syntax error" in res["stderr"].lower()
    assert bad in res["msg"] and "nothing written" in res["msg"]
    assert node_files(good, bad, conf) == before and calls == []
    assert sh("test", "-e", "/etc/rf-v", check=False).returncode != 0  # the directories made for it are gone again
    assert sh("sh", "-c", "ls -a /usr/local/sbin | grep -c rackforge", check=False).stdout.strip() == "0"  # no staged file left


def test_directories_are_made_and_fixed_and_a_failed_validation_puts_them_back(node):
    tsdb, sd, conf = "/var/lib/rf-d/tsdb", "/etc/rf-d/file_sd", "/etc/rf-d/file_sd/node/x.json"
    args = {
        "directories": [{"path": tsdb, "mode": "0750", "owner": "nobody", "group": "nogroup"}, {"path": sd}],
        "files": [{"dest": conf, "content": "[]\n"}],
    }
    res, _calls = units_module(args)
    assert res["changed_directories"] == [tsdb, sd] and res["changed_files"] == [conf]
    assert sh("stat", "-c", "%n %a %U:%G", tsdb, "/var/lib/rf-d", sd, "/etc/rf-d/file_sd/node").stdout.splitlines() == [
        tsdb + " 750 nobody:nogroup",
        "/var/lib/rf-d 755 root:root",
        sd + " 755 root:root",
        "/etc/rf-d/file_sd/node 755 root:root",
    ]
    res, _calls = units_module(args)
    assert not res["changed"] and res["actions"] == []
    # drift is put right; with a file whose validation fails, nothing is (the mode goes back)
    sh("chmod", "0700", tsdb)
    fresh = "/var/lib/rf-d/fresh/deeper"
    bad = dict(args, files=[{"dest": conf, "content": "x\n", "validate": ["false", "%s"]}])
    bad["directories"] = args["directories"] + [{"path": fresh, "mode": "0700"}]
    res, _calls = units_module(bad)
    assert res.get("failed") and "nothing written" in res["msg"]
    assert sh("stat", "-c", "%a", tsdb).stdout.strip() == "700"
    assert sh("test", "-e", "/var/lib/rf-d/fresh", check=False).returncode != 0  # made for the call, gone again
    res, _calls = units_module(args, check=True)
    assert res["actions"] == ["directory %s (mode 0700 -> 0750)" % tsdb]
    assert sh("stat", "-c", "%a", tsdb).stdout.strip() == "700"
    res, _calls = units_module(args)
    assert res["actions"] == ["directory %s (mode 0700 -> 0750)" % tsdb]
    assert sh("stat", "-c", "%a", tsdb).stdout.strip() == "750"


def test_a_unit_that_does_not_exist_fails_naming_it_before_any_change(node):
    script = "/usr/local/sbin/rf-m"
    res, calls = units_module({"files": [{"dest": script, "content": "x\n"}], "units": [{"name": "rf-nope.service", "state": "started"}]})
    assert res.get("failed") and "rf-nope.service: no such unit (LoadState=not-found)" in res["msg"]
    assert calls == [SHOW + " rf-nope.service"] and node_files(script).split() == [script, "missing"]


def test_a_unit_that_fails_to_start_reports_systemds_evidence(node):
    unit = "/etc/systemd/system/rf-f.service"
    res, _calls = units_module(
        {
            "files": [{"dest": unit, "content": "[Service]\nType=oneshot\nExecStart=/bin/false\n"}],
            "units": [{"name": "rf-f", "state": "started"}],
        }
    )
    assert res.get("failed") and res["rc"] != 0 and "rf-f.service" in res["stderr"]
    assert "systemctl start -- rf-f" in res["msg"] and "daemon-reload" in res["msg"]  # what ran before the failure
    assert "ExecStart=/bin/false" in res["msg"] or "status=1/FAILURE" in res["msg"]  # systemctl status in the message
    assert res["actions"] == ["write %s (new)" % unit, "daemon-reload"]
