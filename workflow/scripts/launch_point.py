"""Launch one measurement point and commit its record: the script rule measure_point runs.
Everything is in the launch package next to this file (workflow/scripts/launch/main.py)."""

import sys


from launch.main import main

if __name__ == "__main__":
    sys.exit(main())
