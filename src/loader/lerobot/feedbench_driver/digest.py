"""Each item of a batch digested as feedbench's native loader digests its own
(`Batch::item_digests` in src/loader/batch.rs): SHA-256 over the given keys in order, each
the key, a zero byte, the item's shape (8 bytes little-endian a dimension), its element type
(`F32`, `U8`, `F64`, `I64`, `I32`, `Bool`) and its value bytes; camera keys as the uint8
values their frames hold (float frames × 255, rounded), so that a reader's float conversion
does not count. Two readers gave the same item where the digests are equal."""

import hashlib
import struct
from typing import Any, Dict, List

ELEMENTS = {"float32": "F32", "uint8": "U8", "float64": "F64", "int64": "I64", "int32": "I32",
            "bool": "Bool"}


def item_digests(batch: Dict[str, Any], keys: List[str], cameras: List[str]) -> List[str]:
    """The digest of each item of `batch` over `keys`; a key the batch lacks, or holds as no
    tensor, is digested as missing (so the items differ from a reader that has it)."""
    import torch

    size = next(len(value) for value in batch.values() if isinstance(value, torch.Tensor))
    hashes = [hashlib.sha256() for _ in range(size)]
    for key in keys:
        value = batch.get(key)
        if not isinstance(value, torch.Tensor):
            for digest in hashes:
                digest.update(key.encode() + b"\0missing")
            continue
        if key in cameras and value.is_floating_point():
            value = (value * 255).round().to(torch.uint8)
        element = ELEMENTS.get(str(value.dtype).removeprefix("torch."), str(value.dtype))
        shape = b"".join(struct.pack("<Q", dim) for dim in value.shape[1:])
        values = value.detach().cpu().contiguous().numpy()
        for item, digest in enumerate(hashes):
            digest.update(key.encode() + b"\0" + shape + element.encode())
            digest.update(values[item].tobytes())
    return [digest.hexdigest() for digest in hashes]
