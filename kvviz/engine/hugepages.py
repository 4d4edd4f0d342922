"""A CPU step's weights in 2 MB pages: Linux asked to back a tensor's memory with transparent huge pages now, in
place, where it allows that. Knows Linux's madvise; nothing of models or kernels.

Why. A decode step streams every weight once, front to back, and with 4 KB pages that walk misses the TLB every
4 KB (Zen 3's second-level TLB holds 2,048 entries, 8 MB of 4 KB pages, against a 988 MB step). On a 2-core Zen 3
EPYC whose transparent huge pages are "madvise" (the default of many distributions: none unless asked), the same
151,936 x 896 bf16 matrix read by kvviz's matrix-vector kernel, 9 interleaved rounds: 27.2 GB/s in 4 KB pages,
28.2 GB/s collapsed into 2 MB pages (a plain streaming read beside it 28.2). torch's allocations are never asked
for huge pages unless THP_MEM_ALLOC_ENABLE is set before its first, and a model's weights are allocated before
kvviz sees them, so kvviz asks for them afterwards: MADV_COLLAPSE (Linux 6.1 and later) copies the memory into huge
pages at once (0.38 s for that 272 MB matrix on two cores), and MADV_HUGEPAGE keeps it eligible. The values do not
change; only the pages under them do. In the compiled step (kvviz.engine.regions collapses every copy it makes for
a kernel, and every weight a kernel reads as it is), two loaded copies of the Qwen2.5-0.5B twin in bf16, one
collapsed, 10 interleaved rounds of 64 tokens on that EPYC: 1.08x decode tokens/s (median; 0.91-1.17 by round).

Where it cannot (not Linux, a kernel before 6.1, huge pages turned off, memory a file maps, none free now) nothing
changes and collapse says so by returning 0.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform
from functools import cache

import torch
from torch import Tensor

log = logging.getLogger(__name__)

HUGE_PAGE = 2 << 20  # bytes in a transparent huge page on x86-64 (and arm64 with 4 KB base pages)
MADV_HUGEPAGE = 14  # <linux/mman.h>: eligible for huge pages, kept so
MADV_COLLAPSE = 25  # <linux/mman.h>: made of huge pages now, synchronously (Linux 6.1)


@cache
def _madvise():
    """libc's madvise with its argument types, or None off Linux."""
    if platform.system() != "Linux":
        return None
    fn = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).madvise
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def whole_pages(address: int, nbytes: int) -> tuple[int, int]:
    """The 2 MB-aligned span inside [address, address + nbytes): its start and its length in bytes (0 where no
    whole huge page fits)."""
    start = -(-address // HUGE_PAGE) * HUGE_PAGE
    end = (address + nbytes) // HUGE_PAGE * HUGE_PAGE
    return start, max(0, end - start)


def collapse(tensor: Tensor) -> int:
    """Back the whole 2 MB pages inside `tensor`'s memory (a strided CPU tensor) with huge pages now, and keep them so.
    Returns the bytes now in huge pages: 0 where Linux would not (the reason logged once, at debug level) or where
    the tensor holds no whole huge page (under 2 MB, or 4 MB unaligned at worst)."""
    madvise = _madvise()
    if madvise is None or tensor.device.type != "cpu" or tensor.layout != torch.strided:
        return 0  # another OS, another device, or memory another library holds (oneDNN's opaque tensors)
    storage = tensor.untyped_storage()
    start, length = whole_pages(storage.data_ptr(), storage.nbytes())
    if length == 0:
        return 0
    for advice in (MADV_HUGEPAGE, MADV_COLLAPSE):
        if madvise(start, length, advice) != 0:
            _refused(advice, ctypes.get_errno())
            return 0
    return length


@cache
def _refused(advice: int, errno: int) -> None:
    """Log, once per advice and error, that Linux refused it: EINVAL where the kernel or the memory does not allow
    it, EAGAIN or ENOMEM where no huge page was free."""
    log.debug("madvise(%d) refused with errno %d: the weights stay in small pages", advice, errno)
