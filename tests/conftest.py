import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def root() -> Path:
    return ROOT
