"""Small real file systems for tests that need the kernel to say ENOSPC (root only)."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
from pathlib import Path


def mount_tmpfs(path: Path, size: int) -> bool:
    """Mount a tmpfs of ``size`` bytes at ``path``; False when this process may not mount."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                            capture_output=True, text=True)
    return result.returncode == 0


def unmount(path: Path) -> None:
    gc.collect()  # descriptors held by a failed test's traceback
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(path)], check=True)
