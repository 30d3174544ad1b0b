"""A CRC-32C in C for TensorBoard's own record reader, where TensorFlow is not installed.

Without TensorFlow, TensorBoard reads event files through its stub
(``tensorboard.compat.tensorflow_stub``), whose record reader checks each record's two
CRC-32C sums a byte at a time in Python: half of what reading a record costs, and a file
of a million scalars took minutes. ``google-crc32c`` (in the worker's ``tensorboard``
extra) computes the same sums in C. ``install`` points the stub's ``masked_crc32c`` at it,
once it has given the same sums as the stub's own on known inputs, so TensorBoard's reader
still reads, checks and rejects the records; only the arithmetic moves to C. Without the
package, with its pure-Python fallback, or if the sums differ, the stub keeps its own.
"""

from __future__ import annotations

# What TensorBoard's reader checks records with after ``install``.
TENSORFLOW = "tensorflow"
C = "google-crc32c"
PYTHON = "python"
# Inputs both must give the same sums for: empty, the standard check string, every byte.
_CHECKS = (b"", b"123456789", bytes(range(256)), b"\xff" * 33)
_MASK = 0xFFFFFFFF
# TFRecord's mask of a stored CRC: rotated right by 15 bits, plus this constant.
_MASK_DELTA = 0xA282EAD8


def install() -> str:
    """Give TensorBoard's stub reader the C CRC-32C when it can; what records are checked
    with from now on (TENSORFLOW: its C++ reader, untouched; C; PYTHON)."""
    from tensorboard.compat import tf

    if getattr(tf, "__version__", "") != "stub":
        return TENSORFLOW
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

    theirs = pywrap_tensorflow.masked_crc32c
    if getattr(theirs, "__module__", "") == __name__:
        return C  # installed by an earlier reader of this process
    try:
        import google_crc32c
    except ImportError:
        return PYTHON
    if getattr(google_crc32c, "implementation", "") != "c":
        return PYTHON  # its own fallback is Python too, and slower than the stub's
    value = google_crc32c.value

    def masked_crc32c(data: bytes) -> int:
        crc = value(data)
        return ((((crc >> 15) | (crc << 17)) & _MASK) + _MASK_DELTA) & _MASK

    if any(masked_crc32c(data) != theirs(data) for data in _CHECKS):
        return PYTHON
    pywrap_tensorflow.masked_crc32c = masked_crc32c
    return C
