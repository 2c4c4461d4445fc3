"""A module built for another architecture than this machine's (aarch64 on x86).

Such a library cannot be loaded here, so :class:`CrossModule` reads what a loaded
:class:`~metaschedule.runtime.module.Module` would find in it straight from the ELF file:
the embedded metadata and source are the bytes of the constants
``__metaschedule_metadata`` and ``__metaschedule_source``, located through the file's
symbol table. It exports, lists its functions and checks arguments like a loaded module;
calling or timing it raises :class:`UnsupportedIsaError`. Run it on a machine of its
architecture, or here under qemu with :func:`metaschedule.testing.run_emulated`.
"""

from __future__ import annotations

import struct

from .module import METADATA_SYMBOL, SOURCE_SYMBOL, Module, UnsupportedIsaError

__all__ = ["CrossModule", "elf_arch", "read_elf_string"]

#: ELF ``e_machine`` -> the architecture as :mod:`metaschedule.codegen.isa` names it
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym


class CrossModule(Module):
    """A library of kernels for another architecture, read but not loaded.

    Attributes:
        path: the library.
        arch: its architecture (``"aarch64"``).
        metadata, target: as a loaded module's.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lib = None
        with open(path, "rb") as f:
            data = f.read()
        self.arch = elf_arch(data) or "an unknown architecture"
        self._set_metadata(read_elf_string(data, METADATA_SYMBOL))
        from ..codegen.isa import host_arch  # local: codegen imports runtime

        self._runs_here = False
        self._why = (
            f"this module was built for {self.arch} (-mcpu={self.target.mcpu}); this machine "
            f"is {host_arch()}: run it there, or under qemu with "
            "ms.testing.run_emulated(module, *arrays)"
        )

    def check_runnable(self) -> None:
        """Raise :class:`UnsupportedIsaError`: this machine cannot run the library."""
        raise UnsupportedIsaError(self._why)

    def get_source(self) -> str:
        """The C source of the kernels."""
        with open(self.path, "rb") as f:
            return read_elf_string(f.read(), SOURCE_SYMBOL) or ""

    def __repr__(self) -> str:
        names = ", ".join(self._functions)
        return f"<metaschedule CrossModule ({self.arch}) {names} at {self.path}>"


def elf_arch(data: bytes) -> str | None:
    """The architecture of an ELF file's bytes (``"aarch64"``, ``"x86_64"``, or
    ``"machine <n>"``); None for bytes that are no 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01" or len(data) < 20:
        return None
    machine = struct.unpack_from("<H", data, 18)[0]
    return ELF_MACHINES.get(machine, f"machine {machine}")


def read_elf_string(data: bytes, symbol: str) -> str | None:
    """The NUL-terminated string a global ``const char symbol[]`` of a 64-bit
    little-endian ELF file holds (from the bytes of the file, ``data``); None when the
    file has no such symbol.

    Raises:
        ValueError: ``data`` is no 64-bit little-endian ELF file, or a truncated one.
    """
    if elf_arch(data) is None:
        raise ValueError("not a 64-bit little-endian ELF file")
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)  # e_shoff
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)  # e_shentsize, e_shnum
        sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        wanted = symbol.encode()
        for sec in sections:
            if sec[1] not in (_SHT_SYMTAB, _SHT_DYNSYM) or not sec[9]:
                continue
            names = sections[sec[6]]  # sh_link: the symbol names' string table
            for off in range(sec[4], sec[4] + sec[5], sec[9]):
                name, _, _, shndx, value, size = _SYMBOL.unpack_from(data, off)
                start = names[4] + name
                if data[start : start + len(wanted) + 1] != wanted + b"\0":
                    continue
                if not 0 < shndx < len(sections):
                    continue  # undefined here, or an absolute symbol
                home = sections[shndx]
                begin = home[4] + value - home[3]  # sh_offset + (st_value - sh_addr)
                return data[begin : begin + size].split(b"\0", 1)[0].decode()
    except (struct.error, IndexError, OverflowError) as err:
        raise ValueError(f"a truncated or malformed ELF file ({err})") from None
    return None
