"""The register file of an SM90 SM and its split between warpgroups by ``setmaxnreg``.

A warp-specialized kernel's producer warpgroup gives registers back (``setmaxnreg.dec``) and
its consumer warpgroups take what is left (``setmaxnreg.inc``), a multiple of 8 and at most
240 per thread.

>>> consumer_registers(40, 2)
232
"""

__all__ = ["REGISTER_FILE", "consumer_registers"]

REGISTER_FILE = 65536       # 32-bit registers per SM (sm_90)


def consumer_registers(memory_registers, consumers):
    """Registers per thread of each of ``consumers`` warpgroups beside a producer warpgroup
    that keeps ``memory_registers``: the rest of the register file, rounded down to 8, at
    most 240."""
    return min(240, (REGISTER_FILE // 128 - memory_registers) // consumers // 8 * 8)

