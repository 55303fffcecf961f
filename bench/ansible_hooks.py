#!/usr/bin/env python3
"""ansible-playbook with timing hooks, for bench/breakdown.py (bench only, never in site.yml's runs).

    python3 bench/ansible_hooks.py [ansible-playbook arguments]

Runs ansible-playbook in this process after wrapping four ansible-core 2.19 functions with
timers. Each forked worker (one per host and task) appends one JSON line to the file named by
$RACKFORGE_HOOKS_OUT when it finishes:

    host, action, start, end      TaskExecutor.run: the worker's whole task (epoch seconds)
    cpu                           the worker process's CPU seconds (user + system) at its end
    build                         seconds in ActionBase._configure_module (finding the module and
                                  building its AnsiballZ payload, or reading it from the run's cache)
    built                         whether the payload was built in this worker (the first use of
                                  the module in the run) rather than read from the run's cache
    execute                       seconds in ActionBase._low_level_execute_command (the round trip
                                  over SSH, including the module's run on the node)
    conditions                    seconds in Task._resolve_conditional (when, changed_when, ...)

With RACKFORGE_HOOKS_SHARE_BUILD=1 it also runs an experiment, not a product setting: the parse
trees module payload builds compile (module_common._compile_module_ast) are kept, and those of
ansible.module_utils.basic and what it imports are made here, in the parent process, before
any worker forks. Each worker then inherits them instead of compiling them again at the first
use of each module. It measures what the first-use cost would be if ansible-core shared that
work between its workers; it patches ansible-core's private functions, which is why rackforge
does not do it in production.

The hooks name private functions of ansible-core; when one is missing (another ansible-core
version) the script stops with a message instead of measuring something else.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import sys
import time
import zipfile

OUT = os.environ.get("RACKFORGE_HOOKS_OUT")


def _require(obj, name):
    if not callable(getattr(obj, name, None)):
        sys.exit("bench/ansible_hooks.py: %s.%s is missing (ansible-core other than 2.19?): nothing measured" % (obj.__name__, name))
    return getattr(obj, name)


def install():
    from ansible.executor import module_common
    from ansible.executor.task_executor import TaskExecutor
    from ansible.playbook.task import Task
    from ansible.plugins.action import ActionBase

    state = {}
    run = _require(TaskExecutor, "run")
    configure = _require(ActionBase, "_configure_module")
    execute = _require(ActionBase, "_low_level_execute_command")
    resolve = _require(Task, "_resolve_conditional")
    compile_ast = _require(module_common, "_compile_module_ast")
    _require(module_common, "recursive_finder")

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            started = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                state[name] = state.get(name, 0.0) + time.monotonic() - started

        return wrapper

    def counted_compile(module_name, source_code):
        state["compiled"] = state.get("compiled", 0) + 1
        return compile_ast(module_name, source_code)

    def task_run(self):
        state.clear()
        start = time.time()
        try:
            return run(self)
        finally:
            end = time.time()
            times = os.times()
            line = {
                "host": self._host.get_name(),
                "action": self._task.action,
                "start": start,
                "end": end,
                "cpu": times.user + times.system,
                "build": state.get("build", 0.0),
                "built": state.get("compiled", 0) > 0,
                "execute": state.get("execute", 0.0),
                "conditions": state.get("conditions", 0.0),
            }
            if OUT:
                # one write per worker, O_APPEND: lines from concurrent workers do not interleave
                fd = os.open(OUT, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, (json.dumps(line) + "\n").encode())
                finally:
                    os.close(fd)

    TaskExecutor.run = task_run
    ActionBase._configure_module = timed("build", configure)
    ActionBase._low_level_execute_command = timed("execute", execute)
    Task._resolve_conditional = timed("conditions", resolve)
    module_common._compile_module_ast = counted_compile

    if os.environ.get("RACKFORGE_HOOKS_SHARE_BUILD") == "1":
        share_build(module_common, counted_compile)


def share_build(module_common, compile_ast):
    """Keep compiled parse trees (keyed by module name and source), and compile ansible.module_utils.basic's
    closure in the parent before the first play (the collection loader is ready by then), so that
    every forked worker inherits them."""
    from ansible._internal._ansiballz import _builder
    from ansible.executor.task_queue_manager import TaskQueueManager

    trees = {}
    tqm_run = _require(TaskQueueManager, "run")

    def shared(module_name, source_code):
        key = (module_name, bytes(source_code) if isinstance(source_code, (bytes, bytearray)) else str(source_code))
        tree = trees.get(key)
        if tree is None:
            tree = trees[key] = compile_ast(module_name, source_code)
        return tree

    def warm_then_run(self, *args, **kwargs):
        if not trees:
            module_common.recursive_finder(
                "rackforge_bench_warm",
                "ansible.legacy.rackforge_bench_warm",
                b"from ansible.module_utils.basic import AnsibleModule\n",
                zipfile.ZipFile(io.BytesIO(), "w"),
                datetime.datetime.now(datetime.timezone.utc),
                _builder.ExtensionManager.create(task_vars={}),
            )
        return tqm_run(self, *args, **kwargs)

    module_common._compile_module_ast = shared
    TaskQueueManager.run = warm_then_run


def main():
    install()
    from ansible.cli.playbook import main as playbook_main

    sys.argv = ["ansible-playbook", *sys.argv[1:]]
    return playbook_main()


if __name__ == "__main__":
    sys.exit(main())
