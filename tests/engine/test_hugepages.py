"""kvviz.engine.hugepages: a tensor's memory put in 2 MB pages in place, as Linux's own accounting (/proc/self/smaps)
reports it, its values unchanged; what cannot be collapsed is left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kvviz.engine import hugepages

MB = 1 << 20
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def anon_huge_bytes(address: int, nbytes: int) -> int:
    """AnonHugePages of the mappings that overlap [address, address + nbytes), read from /proc/self/smaps (kB
    there; madvise splits a mapping at the span it is given, so the buffer may lie in several)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start < address + nbytes and address < end
        elif inside and head == "AnonHugePages:":
            total += int(line.split()[1]) * 1024
    return total


@pytest.mark.parametrize(("address", "nbytes", "expected"), [
    (0, 4 * MB, (0, 4 * MB)),                     # aligned: both pages
    (4096, 4 * MB, (2 * MB, 2 * MB)),             # a page past the start: the one whole page inside
    (2 * MB - 1, 2 * MB + 2, (2 * MB, 2 * MB)),   # a byte either side of one page
    (4096, 2 * MB, (2 * MB, 0)),                  # 2 MB unaligned holds no whole page
    (6 * MB, MB, (6 * MB, 0)),                    # under a page
])
def test_whole_pages_are_the_aligned_span_inside(address, nbytes, expected):
    """The span handed to madvise is the 2 MB-aligned one inside the buffer, worked out by hand."""
    assert hugepages.whole_pages(address, nbytes) == expected


def test_a_tensor_is_collapsed_in_place_and_keeps_its_values():
    """collapse() returns the bytes it put in huge pages and the kernel's own count for that mapping agrees; the
    tensor's address and values are unchanged."""
    assert THP.read_text().split("[")[1].split("]")[0] != "never", "this machine's huge pages are turned off"
    tensor = torch.randn(64 * MB // 4)  # 64 MB of fp32: glibc maps it on its own
    before, address = tensor.clone(), tensor.data_ptr()
    done = hugepages.collapse(tensor)
    assert done >= 62 * MB, f"only {done} bytes collapsed of 64 MB"
    assert anon_huge_bytes(address, 64 * MB) >= done, "Linux does not count the pages collapse() reported"
    assert tensor.data_ptr() == address and torch.equal(tensor, before), "collapsing moved or changed the values"


def test_what_cannot_be_collapsed_is_left_and_reported_as_zero():
    """A tensor holding no whole 2 MB page, and oneDNN's opaque copy (no storage of torch's), give 0."""
    assert hugepages.collapse(torch.randn(1000)) == 0
    if torch.backends.mkldnn.is_available():
        assert hugepages.collapse(torch.randn(1024, 1024).to_mkldnn()) == 0
