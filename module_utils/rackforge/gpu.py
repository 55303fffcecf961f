"""GPU clock and power planning (pure): supported application-clock pairs, the nearest pair not
above a request, power-limit ranges. Used by the nvidia_gpu_settings module and a filter."""

from __future__ import annotations


class GpuSettingError(ValueError):
    """A request the GPU cannot take; the message names the setting and the valid values."""


def _pairs(supported):
    """{mem: [graphics, ...]} (keys may be strings from JSON) -> sorted [(mem, graphics)]."""
    return sorted((int(mem), int(gr)) for mem, grs in (supported or {}).items() for gr in grs)


def describe_pairs(supported):
    """'memory 2619 MHz: graphics 1980, 1965, ... MHz' per memory clock, for error messages."""
    by_mem = {}
    for mem, gr in _pairs(supported):
        by_mem.setdefault(mem, []).append(gr)
    return "; ".join(
        "memory %d MHz: graphics %s MHz" % (mem, ", ".join(str(g) for g in sorted(grs, reverse=True)))
        for mem, grs in sorted(by_mem.items(), reverse=True)
    )


def nearest_clock_pair(supported, memory, graphics):
    """The supported (memory, graphics) pair closest to the request without going above it:
    the highest supported memory clock <= memory, then the highest graphics clock <= graphics
    at that memory clock. Raises GpuSettingError when no pair is at or below the request."""
    candidates = [(m, g) for m, g in _pairs(supported) if m <= int(memory) and g <= int(graphics)]
    if not candidates:
        raise GpuSettingError(
            "application_clocks: no supported pair at or below (memory %s, graphics %s) MHz; supported: %s"
            % (memory, graphics, describe_pairs(supported) or "none reported")
        )
    best_mem = max(m for m, _ in candidates)
    return {"memory": best_mem, "graphics": max(g for m, g in candidates if m == best_mem)}


def check_clock_pair(supported, memory, graphics, gpu_label):
    if (int(memory), int(graphics)) not in set(_pairs(supported)):
        raise GpuSettingError(
            "application_clocks (memory %s, graphics %s) MHz is not a supported pair on %s; supported: %s"
            % (memory, graphics, gpu_label, describe_pairs(supported) or "none reported")
        )


def check_power_limit(power, watts, gpu_label):
    low, high = power.get("min_limit"), power.get("max_limit")
    if low is None or high is None:
        raise GpuSettingError("power_limit: %s reports no power limit range (power management not supported)" % gpu_label)
    if not float(low) <= float(watts) <= float(high):
        raise GpuSettingError("power_limit %s W is outside %.0f..%.0f W on %s" % (watts, low, high, gpu_label))


def check_locked_clocks(max_clocks, low, high, gpu_label):
    top = (max_clocks or {}).get("graphics")
    if not 0 < int(low) <= int(high) or (top and int(high) > top):
        raise GpuSettingError(
            "locked_clocks min %s, max %s MHz on %s: need 0 < min <= max <= %s MHz (max graphics clock)" % (low, high, gpu_label, top)
        )
