"""Expected errors of the ``custody`` command line: exactly one line ``error [code]: ...`` on
stderr and exit 2, whatever the terminal width, with the output piped (a subprocess of the
installed entry point at COLUMNS=80, as an operator's shell or a script runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.database import with_database

ENTRY_POINT = str(Path(sys.executable).parent / "custody")
BOX = set("╭╮╰╯│─")


def run(*args: str, env: dict[str, str] | None = None,
        cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """``custody ARGS`` with the output piped, at 80 columns; CUSTODY_* of the caller dropped."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CUSTODY_")}
    return subprocess.run([ENTRY_POINT, *args], env={**base, "COLUMNS": "80", **(env or {})},
                          text=True, capture_output=True, timeout=120, cwd=cwd)


def one_error_line(result: subprocess.CompletedProcess[str], code: str) -> str:
    """The single line of stderr, after checking it is one line with ``code`` and exit 2."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error [{code}]: "), lines[0]
    assert not BOX & set(result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


class TestUsage:
    @pytest.mark.parametrize(("args", "says"), [
        (["verify", "--bogus"], "No such option: --bogus"),
        (["balances"], "Missing argument 'user_id'"),
        (["rebuild-balances", "--batch-size", "many"], "Invalid value for '--batch-size'"),
        (["--log-format", "xml", "verify"], "--log-format"),
        (["no-such-command"], "No such command 'no-such-command'"),
    ])
    def test_a_usage_mistake_is_one_line_with_exit_2(self, args: list[str], says: str) -> None:
        line = one_error_line(run(*args), "usage_invalid")
        assert says in line
        assert "--help`)" in line  # names the help to read

    def test_help_still_exits_0(self) -> None:
        result = run("verify", "--help")
        assert result.returncode == 0 and "Usage" in result.stdout


class TestLongErrors:
    def test_a_long_multiline_database_error_is_one_line(self, server_url: str) -> None:
        # psycopg's connection errors span several lines; the name makes the line long.
        url = with_database(server_url, "no_such_database_" + "x" * 40)
        line = one_error_line(run("verify", env={"CUSTODY_DATABASE_URL": url}),
                              "database_unavailable")
        assert len(line) > 80 and "no_such_database_" in line


    @pytest.mark.parametrize("command", [["db", "upgrade"], ["verify"]])
    def test_an_unreachable_database_is_one_line(self, command: list[str]) -> None:
        refused = "postgresql://nobody@127.0.0.1:1/custody"  # nothing listens on port 1
        line = one_error_line(run(*command, env={"CUSTODY_DATABASE_URL": refused}),
                              "database_unavailable")
        assert "127.0.0.1" in line and "port 1" in line


class TestBadSettings:
    @pytest.mark.parametrize(("variable", "value", "says"), [
        ("CUSTODY_DATABASE_URL", "notaurl", "CUSTODY_DATABASE_URL: not a URL"),
        ("CUSTODY_DATABASE_URL", "mysql://u@h/db", "not a PostgreSQL URL"),
        ("CUSTODY_POOL_SIZE", "abc", "CUSTODY_POOL_SIZE='abc': Input should be a valid integer"),
        ("CUSTODY_POOL_SIZE", "0", "greater than or equal to 1"),
        ("CUSTODY_POST_ATTEMPTS_MAX", "1.5", "CUSTODY_POST_ATTEMPTS_MAX='1.5'"),
        ("CUSTODY_STATEMENT_TIMEOUT_MS", "5", "CUSTODY_STATEMENT_TIMEOUT_MS='5'"),
        ("CUSTODY_DATABASE_POOLER", "session",
         "CUSTODY_DATABASE_POOLER='session': Input should be 'none' or 'transaction'"),
        ("CUSTODY_DATABASE_REPLICA_URL", "mysql://u:s3cret@h/db",
         "CUSTODY_DATABASE_REPLICA_URL: not a PostgreSQL URL"),
    ])
    def test_a_setting_that_does_not_parse_is_one_line(self, variable: str, value: str,
                                                       says: str) -> None:
        line = one_error_line(run("verify", env={variable: value}), "configuration_invalid")
        assert says in line

    def test_a_database_url_is_not_echoed(self) -> None:
        line = one_error_line(run("verify", env={"CUSTODY_DATABASE_URL": "mysql://u:s3cret@h/d"}),
                              "configuration_invalid")
        assert "s3cret" not in line

    def test_a_settings_file_value_names_the_file(self, tmp_path: Path) -> None:
        settings = tmp_path / "custody.toml"
        settings.write_text('[custody]\npool_size = "lots"\n')
        line = one_error_line(run("verify", env={"CUSTODY_SETTINGS_FILE": str(settings)}),
                              "configuration_invalid")
        assert f"{settings} [custody] pool_size='lots'" in line

    def test_a_file_as_data_dir_is_one_line(self, tmp_path: Path) -> None:
        afile = tmp_path / "pg"
        afile.write_text("not a directory")
        line = one_error_line(run("verify", env={"CUSTODY_DATA_DIR": str(afile)}),
                              "configuration_invalid")
        assert f"CUSTODY_DATA_DIR {afile} is not a directory" in line

    def test_a_data_dir_under_a_file_is_one_line(self, tmp_path: Path) -> None:
        (tmp_path / "afile").write_text("")
        line = one_error_line(run("verify", env={"CUSTODY_DATA_DIR": str(tmp_path / "afile/pg")}),
                              "configuration_invalid")
        assert "cannot be created: Not a directory" in line

    def test_a_data_dir_without_permission_is_one_line(self, tmp_path: Path) -> None:
        if os.geteuid() == 0:
            # root may write anywhere on a normal file system; sysfs refuses even root.
            place = Path("/sys/custody-pg")
        else:
            locked = tmp_path / "locked"
            locked.mkdir(mode=0o500)
            place = locked / "pg"
        line = one_error_line(run("verify", env={"CUSTODY_DATA_DIR": str(place)}),
                              "configuration_invalid")
        assert f"CUSTODY_DATA_DIR {place} cannot be created" in line


class TestDataDir:
    def _data_dir(self, cwd: Path, env: dict[str, str] | None = None) -> str:
        base = {k: v for k, v in os.environ.items() if not k.startswith("CUSTODY_")}
        return subprocess.run(
            [sys.executable, "-c",
             "from config.settings import get_settings; print(get_settings().data_dir)"],
            env={**base, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **(env or {})},
            cwd=cwd, text=True, capture_output=True, check=True, timeout=60).stdout.strip()

    def test_the_default_is_the_same_from_any_directory(self, tmp_path: Path) -> None:
        root = Path(__file__).resolve().parents[2]
        (tmp_path / "elsewhere").mkdir()
        assert self._data_dir(tmp_path / "elsewhere") == str(root / "var" / "pg")
        assert self._data_dir(root / "docs") == str(root / "var" / "pg")

    def test_a_relative_data_dir_is_resolved_against_the_current_directory(
            self, tmp_path: Path) -> None:
        assert self._data_dir(tmp_path, {"CUSTODY_DATA_DIR": "db/pg"}) == str(tmp_path / "db/pg")

    def test_a_relative_data_dir_is_resolved_once_for_the_processes_started(
            self, tmp_path: Path) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("CUSTODY_")}
        child = subprocess.run(
            [sys.executable, "-c",
             "import os, subprocess, sys\n"
             "from config.settings import get_settings\n"
             "get_settings()\n"
             "os.chdir('/')\n"  # a child elsewhere sees the same directory
             "print(subprocess.run([sys.executable, '-c', 'import os; "
             "print(os.environ[\"CUSTODY_DATA_DIR\"])'], capture_output=True, text=True)"
             ".stdout.strip())"],
            env={**base, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                 "CUSTODY_DATA_DIR": "db/pg"},
            cwd=tmp_path, text=True, capture_output=True, check=True, timeout=60)
        assert child.stdout.strip() == str(tmp_path / "db/pg")

    def test_help_says_where_the_data_is(self) -> None:
        result = run("--help")
        assert result.returncode == 0
        assert "CUSTODY_DATA_DIR" in result.stdout and "var/pg" in result.stdout


class TestSecretsKey:
    """Secrets at rest (README): a deployment on a configured database needs its secrets key."""

    @pytest.mark.parametrize("command", [["worker"], ["api"], ["secrets", "status"]])
    def test_a_configured_database_without_the_key_refuses_to_start(
            self, database_url: str, command: list[str]) -> None:
        line = one_error_line(run(*command, env={"CUSTODY_DATABASE_URL": database_url}),
                              "configuration_invalid")
        assert "setting CUSTODY_SECRETS_KEY: required with CUSTODY_DATABASE_URL" in line

    def test_a_bad_key_is_one_line_without_the_key(self, database_url: str) -> None:
        bad = "c2hvcnQta2V5LTEyMw=="  # base64, but 13 bytes
        line = one_error_line(run("worker", env={"CUSTODY_DATABASE_URL": database_url,
                                                 "CUSTODY_SECRETS_KEY": bad}),
                              "configuration_invalid")
        assert "setting CUSTODY_SECRETS_KEY: 13 bytes, expected 32" in line and bad not in line
