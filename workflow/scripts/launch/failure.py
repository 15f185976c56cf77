"""What a point that did not measure died of: (status, reason).

The cause is read in this order, first hit wins:
  1. the launcher's own knowledge: the deadline passed (timeout), it was told to stop (cancelled),
     the snakemake process that started it died;
  2. the ranks' error files (torch.distributed.elastic's format: torchrun's --log-dir, or the file
     our launcher or kan.train named): exception type, message, traceback; the earliest one that is
     not a consequence of another rank's failure ("Connection reset by peer" on the survivors);
  3. how the processes ended: a signal -> oom only when an OOM kill was observed (the kernel's
     oom_kill counter, or Slurm's "oom_kill event" line), else "killed by signal N (NAME)";
  4. the trainer's failed record (rank 0's exception), then a consequence-only error file;
  5. the log: an argparse error naming the flag, else the last line of the first traceback.
`oom` means an out-of-memory exception, an allocator failure or an observed OOM kill, nothing else.
The reason is one line plus where the log is.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

from kan.contract import record as records

# what a surviving rank sees when a peer died: never the first cause
COLLATERAL = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "DistNetworkError",
              "connectFullMesh", "SignalException", "ChildFailedError", "Socket Timeout", "recvBytes",
              "Connection refused", "ProcessGroupGloo", "waiting for clients")
OOM_TEXT = ("outofmemoryerror", "memoryerror", *records.OOM_MESSAGES)  # exception names too, in a log
# torchrun's rendezvous errors carry no message of their own; say what they mean
HINTS = {
    "RendezvousTimeoutError": "not every node's torchrun agent joined the rendezvous within timeouts.rdzv_join_s "
                              "(an agent did not start, or cannot reach the rendezvous endpoint on the first node)",
    "RendezvousConnectionError": "the rendezvous store on the first node could not be reached within "
                                 "timeouts.rdzv_read_s",
}
# the last line of a Python traceback: "pkg.module.SomeError: message"
_EXC_LINE = re.compile(r"^(?:\[\w+\]\s*)?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))(?::\s*(.*))?$")
_USAGE = re.compile(r"(python -m kan\.train: error: .*)$")
_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d+)")


def signal_text(signum: int) -> str:
    try:
        return f"signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"signal {signum}"


def read_error_files(folder: Path) -> list[dict]:
    """Every rank error file under `folder`: {message, traceback, timestamp_ns, path}, oldest first."""
    out = []
    for path in sorted(folder.rglob("*error.json")) if folder.exists() else []:
        try:
            msg = json.loads(path.read_text())["message"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(msg, str):  # torchrun writes a plain string for some failures
            msg = {"message": msg, "extraInfo": {}}
        extra = msg.get("extraInfo") or {}
        ts = extra.get("timestamp_ns") or int(extra.get("timestamp") or 0) * 10**9
        out.append({"message": str(msg.get("message", "")).strip(), "traceback": extra.get("py_callstack", ""),
                    "timestamp_ns": int(ts), "path": str(path)})
    return sorted(out, key=lambda e: e["timestamp_ns"])


def _collateral(text: str) -> bool:
    return any(m in text for m in COLLATERAL)


def is_oom_text(text: str) -> bool:
    low = text.lower()
    return any(m in low for m in OOM_TEXT)


def cause_from_log(lines: list[str]) -> str | None:
    """An argparse error (names the flag), else the first traceback's exception line that is not a
    wrapper or a consequence, else the first exception line at all."""
    for ln in lines:
        m = _USAGE.search(ln)
        if m:
            return m.group(1)
    hits = []
    for ln in lines:
        m = _EXC_LINE.match(ln.strip())
        if m:
            hits.append(ln.strip())
    real = [h for h in hits if not _collateral(h)]
    return (real or hits or [None])[0]


def died_of_signal(exit_codes: list[int | None], lines: list[str]) -> int | None:
    """The signal a process or a torchrun worker died of (negative exit code), if any."""
    for rc in exit_codes:
        if rc is not None and rc < 0:
            return -rc
    for ln in lines:
        m = _EXITCODE.search(ln)
        if m and int(m.group(1)) < 0:
            return -int(m.group(1))
    return None


def _with_hint(text: str) -> str:
    for marker, hint in HINTS.items():
        if marker in text:
            return f"{text} -- {hint}"
    return text


def _signal_outcome(sig: int, oom_killed: bool, log_lines: list[str], where: str) -> tuple[str, str]:
    if oom_killed or any("oom_kill event" in ln or "oom-kill" in ln for ln in log_lines):
        return "oom", f"a rank was killed by the out-of-memory killer ({signal_text(sig)}){where}"
    return "killed", f"a rank was killed by {signal_text(sig)}{where}"


def classify(*, timed_out: bool, stop_signal: int | None, trainer: dict | None, errors: list[dict],
             exit_codes: list[int | None], log_lines: list[str], oom_killed: bool, log_path: str,
             runtime_min: int, first_error_code: int | None = None) -> tuple[str, str]:
    """(status, reason) of an attempt that produced no ok record. `first_error_code`: the exit code
    of the process that failed first on its own (the others were stopped because of it)."""
    where = f" (log: {log_path})"
    if timed_out:
        return "timeout", f"the point exceeded its time limit (resources.runtime_min = {runtime_min}) and was stopped"
    if stop_signal is not None:
        return "cancelled", f"the launcher received {signal_text(stop_signal)} and stopped the point{where}"
    if first_error_code is not None and first_error_code < 0:  # the first failure was a signal death
        return _signal_outcome(-first_error_code, oom_killed, log_lines, where)
    real = [e for e in errors if not _collateral(e["message"])]
    if real:
        cause = real[0]["message"].splitlines()[0][:1000]
        return ("oom" if is_oom_text(cause) else "failed"), _with_hint(cause) + where
    sig = died_of_signal(exit_codes, log_lines)
    if sig is not None:
        return _signal_outcome(sig, oom_killed, log_lines, where)
    if trainer is not None and trainer.get("status") in ("failed", "oom"):
        return trainer["status"], _with_hint(str(trainer.get("reason") or "")[:1000]) + where
    if errors:
        return "failed", _with_hint(errors[0]["message"].splitlines()[0][:1000]) + where
    text = cause_from_log(log_lines)
    if text:
        return ("oom" if is_oom_text(text) else "failed"), _with_hint(text[:1000]) + where
    codes = ", ".join(map(str, exit_codes))
    last = log_lines[-1].strip()[:300] if log_lines else "no output"
    return "failed", f"exit code(s) {codes}; last log line: {last}{where}"
