"""Launch one measurement point and commit its record: the script rule measure_point runs.
Everything is in the launch package next to this file (workflow/scripts/launch/main.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from launch.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
