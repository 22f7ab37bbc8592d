"""A GGUF file's header — its scalar metadata and its tensor table — read without its big arrays.

gguf.GGUFReader (llama.cpp's own reader) builds a numpy view for every element of every metadata array before it
returns: for Gemma 3's 262,144-token vocabulary that is ~13 s on two cores (and minutes on a loaded machine), though
the roofline, the ladder and the projector need only the tensor table and a handful of scalar keys. This reader
walks the same layout (GGUF v2/v3, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) with `struct` over a
memory map, keeps scalars and short arrays, and steps over long arrays; type names and block sizes still come from
the `gguf` package (GGMLQuantizationType, GGML_QUANT_SIZES). A big-endian file is handed to GGUFReader.
bench/gguf_header.py measures both on the packaged models.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gguf

MAGIC = b"GGUF"
KEEP_ARRAY = 64  # arrays up to this long are kept (architecture lists, rope sections); longer ones are stepped over
# GGUF value types -> struct format (little-endian); 8 string and 9 array are read apart
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table: shape as the file lists it (innermost dimension first)."""

    name: str
    type_code: int
    shape: tuple[int, ...]

    @property
    def type_name(self) -> str:
        try:
            return gguf.GGMLQuantizationType(self.type_code).name
        except ValueError:
            return f"type {self.type_code}"

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def n_bytes(self) -> int:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(self.type_code)]
        return self.n_elements * size // block


@dataclass
class Header:
    version: int
    fields: dict[str, Any]  # scalars, strings and arrays up to KEEP_ARRAY long
    array_lengths: dict[str, int] = field(default_factory=dict)  # every array's length, kept or stepped over
    tensors: list[TensorInfo] = field(default_factory=list)


class _Cursor:
    def __init__(self, data: mmap.mmap):
        self.data, self.at = data, 0

    def unpack(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        if self.at + length > len(self.data):
            raise ValueError(f"a string of {length} bytes runs past the end of the file")
        text = bytes(self.data[self.at:self.at + length]).decode("utf-8", errors="replace")
        self.at += length
        return text

    def skip_strings(self, count: int) -> None:
        at, data = self.at, self.data
        for _ in range(count):
            at += 8 + struct.unpack_from("<Q", data, at)[0]
        if at > len(data):
            raise ValueError("a string array runs past the end of the file")
        self.at = at

    def value(self, kind: int, key: str, header: Header) -> Any:
        if kind in SCALARS:
            return self.unpack(SCALARS[kind])
        if kind == STRING:
            return self.string()
        if kind != ARRAY:
            raise ValueError(f"key {key!r}: unknown value type {kind}")
        inner, count = self.unpack("<I"), self.unpack("<Q")
        header.array_lengths[key] = count
        if count <= KEEP_ARRAY:
            return [self.value(inner, key, header) for _ in range(count)]
        if inner == STRING:
            self.skip_strings(count)
        elif inner in SCALARS:
            self.at += count * struct.calcsize(SCALARS[inner])
        else:  # arrays of arrays: walk them
            for _ in range(count):
                self.value(inner, key, header)
        return None


def read_header(path: str | Path) -> Header:
    """The header of the GGUF file at `path`; ValueError (naming the file) when it is not one."""
    path = Path(path)
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data[:4] != MAGIC:
                raise ValueError("no GGUF magic")
            version = struct.unpack_from("<I", data, 4)[0]
            if version & 0xFFFF == 0:  # a big-endian file reads as a huge little-endian version
                return _from_reader(path)
            if version not in (2, 3):
                raise ValueError(f"GGUF version {version} (2 and 3 are read)")
            cursor = _Cursor(data)
            cursor.at = 8
            n_tensors, n_kv = cursor.unpack("<Q"), cursor.unpack("<Q")
            header = Header(version=version, fields={})
            for _ in range(n_kv):
                key = cursor.string()
                header.fields[key] = cursor.value(cursor.unpack("<I"), key, header)
            for _ in range(n_tensors):
                name = cursor.string()
                dims = tuple(cursor.unpack("<Q") for _ in range(cursor.unpack("<I")))
                kind = cursor.unpack("<I")
                cursor.unpack("<Q")  # the tensor's data offset: not needed
                header.tensors.append(TensorInfo(name, kind, dims))
            return header
    except (OSError, ValueError, struct.error) as exc:
        raise ValueError(f"{path}: not a readable GGUF file ({exc})") from None


def file_type_name(code: Any) -> str:
    """llama.cpp's LLAMA_FTYPE name of a general.file_type value (MOSTLY_Q4_K_M); 'file_type <value>' for one the
    `gguf` package does not know, '' where the header has none."""
    if not isinstance(code, int) or isinstance(code, bool):
        return "" if code is None else f"file_type {code!r}"
    try:
        return gguf.LlamaFileType(code).name
    except ValueError:
        return f"file_type {code}"


def quantization_name(file_type: str) -> str:
    """A file type as params and manifests write a quantization (MOSTLY_Q4_K_M -> q4_k_m, ALL_F32 -> f32); '' for a
    file type with no LLAMA_FTYPE name."""
    if not file_type or file_type.startswith("file_type") or file_type == "GUESSED":
        return ""
    return file_type.removeprefix("MOSTLY_").removeprefix("ALL_").lower()


def _from_reader(path: Path) -> Header:
    reader = gguf.GGUFReader(str(path))
    header = Header(version=int(reader.fields["GGUF.version"].parts[-1][0]), fields={})
    for key, entry in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if entry.types and entry.types[0] == gguf.GGUFValueType.ARRAY:
            header.array_lengths[key] = len(entry.data)
            if len(entry.data) > KEEP_ARRAY:
                header.fields[key] = None
                continue
        header.fields[key] = entry.contents()
    header.tensors = [TensorInfo(t.name, int(t.tensor_type), tuple(int(d) for d in t.shape)) for t in reader.tensors]
    return header
