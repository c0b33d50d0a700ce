from __future__ import annotations

from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture
def hang_script() -> Path:
    return SCRIPTS / "hang.py"
