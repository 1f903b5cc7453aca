"""The LeRobot installed beside feedbench, and the newest one feedbench was held to: what the
reader's contract, the self-check and feedbench-lerobot-train decide from."""

# The newest LeRobot the reader and feedbench-lerobot-train were held to by their tests (LeRobot's
# main); a newer one is served where the self-check passes.
NEWEST_CHECKED = (0, 6, 2)


def installed_lerobot():
    """The installed LeRobot's version as (text, (major, minor, patch)), None without one; a
    version of no such numbers is (0, 0, 0)."""
    import importlib.metadata
    import re

    try:
        text = importlib.metadata.version("lerobot")
    except importlib.metadata.PackageNotFoundError:
        return None
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    return text, tuple(int(part) for part in found.groups()) if found else (0, 0, 0)
