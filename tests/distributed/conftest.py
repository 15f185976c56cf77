"""Every test here starts real ranks or trainers (torchrun, gloo process groups, kan.train or
warm-start server subprocesses): marked `distributed`, so `make test-fast` leaves them out."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.distributed)
