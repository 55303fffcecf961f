#!/usr/bin/python
"""Ansible module: the download sources a role needs answer from this node (read-only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_reachable_info
short_description: Check that the node reaches the URLs a role downloads from, naming the variable of any it cannot
description:
  - Read-only. Sends one HEAD request per URL from the node (its own route, proxy environment and
    CA store) and expects HTTP 200.
  - Fails when any URL does not answer 200, naming for each the URL, why (the HTTP status, a
    refused connection, a timeout) and the variable it came from, so a wrong mirror stops the run
    before any change. Runs in check mode too (it changes nothing).
options:
  urls:
    description: "[{url, var}]: each URL and the variable the operator sets it with."
    type: list
    elements: dict
    required: true
  timeout: {description: Seconds to wait for each answer., type: int, default: 10}
  host: {description: The inventory name the message starts with., type: str, default: ""}
  needed_for:
    description:
      - "{repository, packages}, as the role's rackforge_packages call gives them: the URLs are needed only
        to install these. When the node already has every package at its version and held as asked, with the
        repository's key and source in place, nothing will be fetched and no URL is checked (C(not_needed)),
        so a converged node's re-run does not depend on the repository being up. The module's action plugin
        decides that on the controller from the run's package snapshot (rackforge_packages_snapshot, taken by
        the preflight's read); without one, the module reads the packages itself."
    type: dict
"""

RETURN = r"""
results:
  description: "[{url, var, status, reason}] per URL (status -1 where no HTTP answer came); [] when not needed."
  type: list
  returned: always
not_needed:
  description: "True when needed_for's packages need nothing from the URLs (none was checked)."
  type: bool
  returned: with needed_for
decided_on_controller:
  description: "True when the action plugin answered not_needed from the run's snapshot."
  type: bool
  returned: when so
"""

import socket
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge import packages_snapshot as snapshots
from ansible.module_utils.urls import open_url


def probe(url, timeout):
    """(HTTP status or -1, why) of a HEAD request."""
    try:
        with open_url(url, method="HEAD", timeout=timeout) as resp:
            return resp.status, "HTTP %d" % resp.status
    except HTTPError as exc:
        return exc.code, "HTTP %d" % exc.code
    except URLError as exc:
        return -1, str(getattr(exc, "reason", exc))
    except (socket.timeout, TimeoutError):
        return -1, "timed out after %d s" % timeout
    except (OSError, ValueError) as exc:
        return -1, str(exc)


def main():
    module = AnsibleModule(
        argument_spec={
            "urls": {"type": "list", "elements": "dict", "required": True},
            "timeout": {"type": "int", "default": 10},
            "host": {"type": "str", "default": ""},
            "needed_for": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    needed_for = module.params["needed_for"]
    if needed_for is not None and module.get_bin_path("dpkg-query"):
        here = snapshots.snapshot("node", *snapshots.read_node(module, C_ENV))
        if snapshots.decide(needed_for, here, "node") is not None:
            module.exit_json(changed=False, results=[], not_needed=True, msg=snapshots.NOT_NEEDED)
    results = []
    for item in module.params["urls"]:
        if not item.get("url") or not item.get("var"):
            module.fail_json(msg="rackforge_reachable_info: each of urls needs url and var, got %r" % (item,))
        status, reason = probe(item["url"], module.params["timeout"])
        results.append({"url": item["url"], "var": item["var"], "status": status, "reason": reason})
    bad = [r for r in results if r["status"] != 200]
    if bad:
        prefix = "%s: " % module.params["host"] if module.params["host"] else ""
        lines = ["cannot reach %s (%s): check %s and the node's route to it" % (r["url"], r["reason"], r["var"]) for r in bad]
        module.fail_json(msg="%s%s. Nothing was changed." % (prefix, "; ".join(lines)), results=results)
    module.exit_json(changed=False, results=results, **({} if needed_for is None else {"not_needed": False}))


if __name__ == "__main__":
    main()
