"""The job imports pyspark from the installed package, not from spark-submit's zip of the same package."""

from __future__ import annotations

from pathlib import Path

from mq.trace.analytics.pyspark_path import bundled_zips, prefer_installed_pyspark


def _site(root: Path, *, py4j: bool = True) -> tuple[Path, Path, Path]:
    """A pip-style site directory holding pyspark (with its bundled zips) and, optionally, py4j."""
    site = root / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    if py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    pyspark_zip, py4j_zip = lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip"
    for z in (pyspark_zip, py4j_zip):
        z.write_bytes(b"")
    return site, pyspark_zip, py4j_zip


def test_zips_of_an_installed_package_leave_the_path(tmp_path: Path) -> None:
    site, pyspark_zip, py4j_zip = _site(tmp_path)
    path = [str(tmp_path / "job"), str(pyspark_zip), str(py4j_zip), "/usr/lib/python3.11", str(site)]
    prefer_installed_pyspark(path)
    assert path == [str(tmp_path / "job"), "/usr/lib/python3.11", str(site)]


def test_a_zip_stays_when_its_package_is_not_importable(tmp_path: Path) -> None:
    site, pyspark_zip, py4j_zip = _site(tmp_path, py4j=False)
    # py4j is not installed next to pyspark: its zip is the only py4j there is
    assert bundled_zips([str(pyspark_zip), str(py4j_zip), str(site)]) == [str(pyspark_zip)]
    # the site directory is not on the path: nothing else provides pyspark
    assert bundled_zips([str(pyspark_zip), str(py4j_zip)]) == []


def test_a_spark_home_distribution_keeps_its_zips(tmp_path: Path) -> None:
    lib = tmp_path / "spark-4.0.0-bin-hadoop3" / "python" / "lib"
    lib.mkdir(parents=True)
    zips = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    site, _, _ = _site(tmp_path / "other")
    path = [*zips, str(site)]
    prefer_installed_pyspark(path)
    assert path == [*zips, str(site)]
