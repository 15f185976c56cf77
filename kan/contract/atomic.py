"""The atomic text write of the workflow's files: a temp file in the same folder, then a rename, so a
reader sees the old file or the whole new one. Standard library only: the launcher (launch/netns.py)
writes with it too, and must not pay the analysis's pandas import. A point's record has its own writer
(kan/contract/record.py write): it also fsyncs the file and its folder, since a record must survive
a machine that dies."""

from __future__ import annotations

import os
from pathlib import Path


def write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a temp file per process: two may write the same file at once (`make report` beside a running study)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
