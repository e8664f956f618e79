"""The manual's conformance page (docs/src/python-conformance.md) is what
python/tools/conformance.py makes from htcondor2, classad2 and this andes."""

import pathlib
import subprocess
import sys

from needs import needed

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_conformance_page_is_what_the_packages_make_now() -> None:
    needed("htcondor2", "htcondor")
    script = REPO / "python" / "tools" / "conformance.py"
    page = REPO / "docs" / "src" / "python-conformance.md"
    r = subprocess.run(
        [sys.executable, str(script), "--check", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "the page is current\n"
