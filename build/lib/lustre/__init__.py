"""ddlio.lustre: everything that talks to Lustre, and says so clearly when the file system is not Lustre."""

from lustre.fs import FsInfo, fs_info, is_lustre
from lustre.layout import Layout, LayoutRecord, apply_layout, read_layout

__all__ = ["FsInfo", "Layout", "LayoutRecord", "apply_layout", "fs_info", "is_lustre", "read_layout"]
