"""The drivers' class-data sharing archive: which one a driver maps, and how it is told.

Test plan:
- a driver maps the archive RILLET_SPARK_CLASS_ARCHIVE names only when the file is there (a
  missing one must not stop the JVM from starting);
- the flag is added to the App's own driver Java options, not put in their place;
- without an archive the driver's options are left as they are.
"""

from __future__ import annotations

from pathlib import Path

from rillet.runtime.jvm import classsharing


def test_the_named_archive_is_used_only_when_it_exists(tmp_path: Path) -> None:
    archive = tmp_path / "driver.jsa"
    environ = {classsharing.ARCHIVE_ENV: str(archive)}
    assert classsharing.archive_path(environ) is None
    archive.write_bytes(b"classes")
    assert classsharing.archive_path(environ) == archive
    assert classsharing.archive_path({}) is None


def test_the_archive_flag_joins_the_apps_own_java_options() -> None:
    archive = Path("/opt/rillet/spark-classes.jsa")
    own = {classsharing.DRIVER_JAVA_OPTIONS: "-XX:+UseG1GC -Dapp=clicks"}
    assert classsharing.java_options(own, archive) == {
        classsharing.DRIVER_JAVA_OPTIONS: "-XX:+UseG1GC -Dapp=clicks "
        "-XX:SharedArchiveFile=/opt/rillet/spark-classes.jsa"
    }
    assert classsharing.java_options({}, archive) == {
        classsharing.DRIVER_JAVA_OPTIONS: "-XX:SharedArchiveFile=/opt/rillet/spark-classes.jsa"
    }


def test_without_an_archive_the_drivers_options_stay_as_they_are() -> None:
    own = {classsharing.DRIVER_JAVA_OPTIONS: "-XX:+UseG1GC"}
    assert classsharing.java_options(own, None) == {}
