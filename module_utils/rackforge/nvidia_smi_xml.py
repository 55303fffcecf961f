"""Parser for `nvidia-smi -q -x` (no I/O); re-exported by ansible.module_utils.rackforge.nvidia_smi,
the public import path (see its docstring)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible.module_utils.rackforge.nvidia_smi_common import NA_VALUES, ParseError, _number


def _xml_text(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _first_number(node, tags):
    for tag in tags:
        value = _number(_xml_text(node, tag))
        if value is not None:
            return value
    return None


def _clock_block(gpu, tag, keys=("graphics_clock", "sm_clock", "mem_clock")):
    block = gpu.find(tag)
    if block is None:
        return {}
    out = {}
    for key in keys:
        value = _number(_xml_text(block, key), int)
        if value is not None:
            out[key.replace("_clock", "")] = value
    return out


def _power_block(block):
    """Power readings of one <gpu_power_readings> / <power_readings> / <module_power_readings> block (W, None where N/A).

    Tags by driver branch: up to 530 <power_draw>, <power_limit> (requested) and <enforced_power_limit>;
    535-545 <power_draw>, <current_power_limit> (in force) and <requested_power_limit>; 550+ no
    <power_draw> but <average_power_draw> (1 s average) and <instant_power_draw>. draw is
    power_draw, else the average, else the instantaneous reading (590 prints the average as N/A on
    some GeForce parts); limit is the limit in force, requested_limit what was last set (-pl).
    """
    return {
        "draw": _first_number(block, ("power_draw", "average_power_draw", "instant_power_draw")),
        "draw_average": _first_number(block, ("average_power_draw",)),
        "draw_instant": _first_number(block, ("instant_power_draw",)),
        "limit": _first_number(block, ("current_power_limit", "enforced_power_limit", "power_limit")),
        "requested_limit": _first_number(block, ("requested_power_limit", "power_limit")),
        "default_limit": _first_number(block, ("default_power_limit",)),
        "min_limit": _first_number(block, ("min_power_limit",)),
        "max_limit": _first_number(block, ("max_power_limit",)),
    }


def _supported_clocks(gpu, position):
    supported = {}
    for mem in gpu.findall("supported_clocks/supported_mem_clock"):
        raw = _xml_text(mem, "value")
        mem_value = _number(raw, int)
        if mem_value is None:
            raise ParseError("nvidia-smi -q -x: GPU %d supported memory clock %r is not a number" % (position, raw))
        graphics = []
        for g in mem.findall("supported_graphics_clock"):
            value = _number(g.text, int)
            if value is None:
                raise ParseError(
                    "nvidia-smi -q -x: GPU %d supported graphics clock %r (memory %d MHz) is not a number" % (position, g.text, mem_value)
                )
            graphics.append(value)
        supported[mem_value] = graphics
    return supported


def parse_query_xml(text):
    """Parse `nvidia-smi -q -x` into plain facts.

    {"driver_version", "cuda_version", "attached_gpus": int, "gpus": [ {
        "index", "minor_number", "name", "uuid", "bus_id", "architecture", "persistence_mode": bool,
        "mig_mode", "memory_total_mib", "clocks", "applications_clocks", "default_applications_clocks",
        "max_clocks" ({"graphics": MHz, "sm": MHz, "mem": MHz}), "power": {"draw", "draw_average",
        "draw_instant", "limit", "requested_limit", "default_limit", "min_limit", "max_limit"} (W, None
        where N/A), "module_power": the same for <module_power_readings> or None where the driver
        prints none, "supported_clocks": {mem MHz: [graphics MHz, ...]}, "fabric": {"state", "status"} } ]}
    index is the GPU's position in the output, which is nvidia-smi's enumeration (PCI bus) order:
    the number `nvidia-smi -i` takes. minor_number is /dev/nvidia<N> (None where N/A, as on
    Windows); it can differ from index. mig_mode is <mig_mode><current_mig> as printed, None where N/A.
    Power tags of drivers 418 to 595 are read (see _power_block).
    """
    data = text
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if not isinstance(data, bytes):
        raise ParseError("nvidia-smi -q -x: expected the command's output as text, got %s" % type(text).__name__)
    try:
        root = ET.fromstring(data)
    except (ET.ParseError, LookupError, ValueError) as exc:
        raise ParseError("nvidia-smi -q -x: not XML (%s)" % exc) from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi -q -x: root element is %r, not nvidia_smi_log" % root.tag)
    gpus = []
    for position, gpu in enumerate(root.findall("gpu")):
        power = gpu.find("gpu_power_readings")
        if power is None:
            power = gpu.find("power_readings")
        module_power = gpu.find("module_power_readings")
        mig = _xml_text(gpu, "mig_mode/current_mig")
        gpus.append(
            {
                "index": position,
                "minor_number": _number(_xml_text(gpu, "minor_number"), int),
                "name": _xml_text(gpu, "product_name"),
                "uuid": _xml_text(gpu, "uuid"),
                "bus_id": gpu.get("id") or _xml_text(gpu, "pci/pci_bus_id"),
                "architecture": _xml_text(gpu, "product_architecture"),
                "persistence_mode": _xml_text(gpu, "persistence_mode") == "Enabled",
                "mig_mode": None if mig in NA_VALUES else mig,
                "memory_total_mib": _number(_xml_text(gpu, "fb_memory_usage/total"), int),
                "clocks": _clock_block(gpu, "clocks"),
                "applications_clocks": _clock_block(gpu, "applications_clocks"),
                "default_applications_clocks": _clock_block(gpu, "default_applications_clocks"),
                "max_clocks": _clock_block(gpu, "max_clocks"),
                "power": _power_block(power),
                "module_power": _power_block(module_power) if module_power is not None else None,
                "supported_clocks": _supported_clocks(gpu, position),
                "fabric": {
                    "state": _xml_text(gpu, "fabric/state") or "N/A",
                    "status": _xml_text(gpu, "fabric/status") or "N/A",
                },
            }
        )
    return {
        "driver_version": _xml_text(root, "driver_version"),
        "cuda_version": _xml_text(root, "cuda_version"),
        "attached_gpus": _number(_xml_text(root, "attached_gpus"), int),
        "gpus": gpus,
    }
