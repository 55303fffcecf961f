"""kubectl for the modules that run it on the control plane: its argv with the kubeconfig, and a
runner that fails the task with the command's rc, stdout and stderr (the evidence) when it exits
non-zero."""

from __future__ import annotations

from ansible.module_utils.rackforge import C_ENV


def kubectl_argv(module, kubeconfig):
    """[kubectl, --kubeconfig, FILE]: what every call starts with (kubectl must be installed)."""
    return [module.get_bin_path("kubectl", required=True), "--kubeconfig", kubeconfig]


def kubectl_runner(module, base, prefix):
    """run(*args): `base + args`'s stdout; a non-zero exit fails the task with msg
    `<prefix><args> failed (rc N): <its error output's tail>` and its rc, stdout and stderr."""

    def run(*args):
        rc, out, err = module.run_command([*base, *args], environ_update=C_ENV)
        if rc != 0:
            msg = "%s%s failed (rc %d): %s" % (prefix, " ".join(args), rc, (err or out).strip()[-2000:])
            module.fail_json(msg=msg, rc=rc, stdout=out, stderr=err)
        return out

    return run
