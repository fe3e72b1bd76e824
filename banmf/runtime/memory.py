"""The memory budget: how much memory there is, and the check made before large allocations.

Readers and generators estimate what a matrix will take from its header or arguments, before
allocating anything, and call :func:`check_memory`; a file claiming 3·10⁹ rows is refused in one
line instead of being allocated until the kernel kills the process. The budget is the memory
available now (``MemAvailable``, capped by the cgroup's limit), or ``BANMF_MEMORY_LIMIT`` when it
is set. Sizes use binary multiples throughout: 1K = 1024 bytes, 1G = 2³⁰ bytes (as ``free -h``
and container runtimes count them).
"""

from __future__ import annotations

import os
import re

from ..exceptions import InputError, InvalidParameterError

ENV_VAR = "BANMF_MEMORY_LIMIT"

_UNITS = "KMGTPEZY"
# Positions in an n×m matrix are addressed as row-major int64 keys i·m + j in places (duplicate
# removal, noise), so n·m must fit in int64.
MAX_POSITIONS = 2**63 - 1


def parse_size(text: str, what: str = ENV_VAR) -> int:
    """Bytes in a size such as ``"1073741824"``, ``"512M"``, ``"8G"``, ``"1.5T"`` (or ``8GB``, ``8GiB``)."""
    match = re.fullmatch(
        r"\s*([0-9]+(?:\.[0-9]*)?)\s*(?:([KMGTP])(?:i?B)?|B)?\s*", text, re.IGNORECASE
    )
    if match is None or float(match.group(1)) <= 0:
        raise InvalidParameterError(
            f"{what}={text!r} is not a size: give a positive number of bytes, optionally with "
            "K, M, G or T (e.g. 8G)"
        )
    unit = match.group(2)
    scale = 1024 ** (_UNITS.index(unit.upper()) + 1) if unit else 1
    return int(float(match.group(1)) * scale)


def format_size(nbytes: float) -> str:
    """``1536`` → ``"1.5 KB"``, ``5.2e10`` → ``"48.4 GB"`` (binary multiples)."""
    if nbytes < 1024:
        return f"{int(nbytes)} bytes"
    try:
        value = float(nbytes)
    except OverflowError:  # a Python int from an absurd header
        return "more than 1e308 bytes"
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}B" if value < 1e6 else f"{value:.3g} {unit}B"
    raise AssertionError("unreachable")


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (no limit) and junk alike


def _inactive_file(stat_path: str) -> int:
    """Page cache the kernel can drop (``inactive_file`` of a cgroup's memory.stat), or 0."""
    try:
        with open(stat_path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key in ("inactive_file", "total_inactive_file"):
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _cgroup_available() -> int | None:
    """What the cgroup's memory limit leaves (v2 ``memory.max``, else v1), or None."""
    for limit_file, usage_file, stat_file in (
        (
            "/sys/fs/cgroup/memory.max",
            "/sys/fs/cgroup/memory.current",
            "/sys/fs/cgroup/memory.stat",
        ),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
            "/sys/fs/cgroup/memory/memory.stat",
        ),
    ):
        limit = _read_int(limit_file)
        if limit is None or limit >= 2**60:  # v1 writes "no limit" as a huge number
            continue
        usage = _read_int(usage_file) or 0
        return max(limit - max(usage - _inactive_file(stat_file), 0), 0)
    return None


def _system_available() -> int | None:
    """``MemAvailable`` on Linux; free (else total) physical memory elsewhere; None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            count, size = os.sysconf(pages), os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # unknown name, or no sysconf (Windows)
            continue
        if count > 0 and size > 0:
            return count * size
    return None


def _address_space_left() -> int | None:
    """What ``ulimit -v`` (RLIMIT_AS) leaves of the process's address space, or None."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return max(limit - int(line.split()[1]) * 1024, 0)
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return None


def available_memory() -> int | None:
    """Bytes the process may still allocate: ``BANMF_MEMORY_LIMIT`` if set, else the memory
    available now, capped by the cgroup's limit and ``ulimit -v``; None when the system does
    not say.

    Raises
    ------
    banmf.exceptions.InvalidParameterError
        ``BANMF_MEMORY_LIMIT`` is set but is not a size (a ``ValueError``).
    """
    override = os.environ.get(ENV_VAR)
    if override is not None and override.strip():
        return parse_size(override)
    found = [
        v
        for v in (_system_available(), _cgroup_available(), _address_space_left())
        if v is not None
    ]
    return min(found) if found else None


def check_memory(nbytes: float, what: str, fix: str = "") -> None:
    """Refuse, in one line, work that needs more than the memory available.

    Parameters
    ----------
    nbytes : number
        Estimated peak memory of the work.
    what : str
        Names the work, e.g. ``"data.mtx, line 2: a 3000000000×3 matrix"``.
    fix : str, optional
        What the caller can change besides the budget, e.g. ``"choose a smaller
        n_components"``.

    Raises
    ------
    banmf.exceptions.InputError
        ``nbytes`` exceeds :func:`available_memory` (a ``ValueError``).
    banmf.exceptions.InvalidParameterError
        ``BANMF_MEMORY_LIMIT`` is not a size.
    """
    budget = available_memory()
    if budget is not None and nbytes > budget:
        raise InputError(
            f"{what} needs about {format_size(nbytes)}, more than the {format_size(budget)} "
            f"available ({fix + ', or ' if fix else ''}set {ENV_VAR} to change the budget)"
        )


def matrix_bytes(n: int, m: int, nnz: int) -> int:
    """Memory of an n×m support mask with nnz entries, plus one count per row and per column
    (the least any use of it needs: degrees, empty rows and columns)."""
    index = 4 if max(n, m, nnz) < 2**31 - 1 else 8
    return nnz * (index + 1) + (n + 1) * index + 8 * (n + m)


def _approx(count: int) -> str:
    try:
        return f"{count:.3g}"
    except OverflowError:
        return "more than 1e308"


def check_matrix_size(n: int, m: int, nnz: int, what: str, extra: int = 0) -> None:
    """Refuse an n×m matrix with nnz entries that 64-bit indices cannot address or that the
    memory cannot hold (with ``extra`` bytes of temporaries for building it).

    Raises
    ------
    banmf.exceptions.InputError
        In one line starting with ``what`` (a ``ValueError``).
    """
    if n * m > MAX_POSITIONS:
        raise InputError(
            f"{what}: a {n}×{m} matrix is too large ({_approx(n * m)} positions; 64-bit indices "
            f"address at most {_approx(MAX_POSITIONS)})"
        )
    check_memory(matrix_bytes(n, m, nnz) + extra, f"{what}: a {n}×{m} matrix with {nnz} nonzeros")
