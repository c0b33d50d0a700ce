from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture
def allreduce_script() -> Path:
    return SCRIPTS / "allreduce.py"
