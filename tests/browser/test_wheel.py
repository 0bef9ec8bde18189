"""The package as ``pip install`` builds it, in a fresh venv: lean without extras, and with only
``[lab]`` a lab page whose every file (uPlot's included) is served — no npm on the way."""

from __future__ import annotations

import subprocess
import venv
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Response

import source

from .conftest import CHROMIUM, serve_lab

HEAVY = ("numpy", "psycopg", "redis", "etcd3gw", "starlette", "uvicorn")


def run(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's base install (``source.base_install``: a fresh venv with cronlab as pip builds
    it and nothing else of ours, and the wheel). Shared: the tests here only read it."""
    return source.base_install(tmp_path_factory)


@pytest.fixture(scope="module")
def fresh(installed: Path) -> Path:
    """The base install's python."""
    return installed / "venv" / "bin" / "python"


@pytest.fixture(scope="module")
def wheel(installed: Path) -> Path:
    """The wheel ``pip wheel`` built from the same copy of the clone."""
    (built,) = (installed / "dist").glob("cronlab-*.whl")
    return built


def test_the_wheel_ships_py_typed_so_mypy_checks_a_users_calls(fresh: Path, wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as built:
        names = set(built.namelist())
    assert "cronlab/py.typed" in names, sorted(n for n in names if n.count("/") == 1)
    site = run(str(fresh), "-c", "import cronlab; print(cronlab.__file__)")
    assert Path(site.stdout.strip()).with_name("py.typed").is_file(), site.stderr


def test_import_cronlab_loads_no_backend_and_no_web_stack(fresh: Path) -> None:
    done = run(str(fresh), "-X", "importtime", "-c", "import cronlab")
    assert done.returncode == 0, done.stderr
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["simulate"], "lab"),
        (["lab", "--no-open"], "lab"),
        (["status", "--store", "postgresql://u@127.0.0.1:5432/x"], "postgres"),
        (["worker", "--store", "sqlite:///w.db", "--queue", "redis://127.0.0.1"], "redis"),
        (["status", "--store", "sqlite:///s.db", "--election", "etcd://127.0.0.1:2379"], "etcd"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(
    fresh: Path, tmp_path: Path, argv: list[str], extra: str
) -> None:
    done = run(str(fresh), "-m", "cronlab", *argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cronlab[{extra}]" in lines[0], done.stderr


def test_with_only_the_lab_extra_the_page_and_its_charts_load(
    wheel: Path, browser: Browser, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} missing: scripts/setup.sh installs it")
    venv.create(tmp_path / "venv", with_pip=True)  # its own: the base install stays lean
    python = tmp_path / "venv" / "bin" / "python"
    done = run(str(python), "-m", "pip", "install", "-q", f"{wheel}[lab]")
    assert done.returncode == 0, done.stderr
    bad: list[str] = []
    errors: list[str] = []
    with serve_lab(python=str(python)) as url:
        page = browser.new_page()
        page.on("response", lambda r: _keep_bad(bad, r))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url + "/")
        page.wait_for_selector(".uplot canvas", timeout=20_000)
        page.close()
    assert bad == [] and errors == []


def _keep_bad(bad: list[str], r: Response) -> None:
    if r.status >= 400:
        bad.append(f"{r.status} {r.url}")
